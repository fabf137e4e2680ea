"""The generic call kit every learner's role calls are made with; it knows no role by name.

- :mod:`.spec`: :class:`~.spec.Role`, what a learner declares of each role it calls (name, pool,
  token limit, prompt files, whether its prompt holds the learned context).
- :mod:`.calls`: :class:`~.calls.RoleCalls`, the role calls of one run: requests sampled and
  seeded per role, every call accounted, prompts cut to fit the endpoint's context.
- :mod:`.clients`: the role map (endpoints with their replicas, seed, sampling per role) and the
  one place role clients are built from it.
- :mod:`.base`: prompt files, filling templates, JSON out of model output, answers that are none.
- :mod:`.bounds`: bounds that make each schema a grammar a model cannot loop in.
- :mod:`.budget`: prompts that fit the endpoint's context.
- :mod:`.trajectory`: an agent's trajectory as a learner's role reads it, within a budget.
- :mod:`.workload`: the prompts a start-up probe sends to measure an endpoint on a role's own work.
Each learner names and declares its own roles in its package (ACE's generator, reflector,
curator and reducer in :mod:`combee_fast.ace.roles`).
"""
