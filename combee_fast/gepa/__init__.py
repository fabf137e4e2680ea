"""GEPA as a learner (a system prompt), registered in :mod:`combee_fast.learners`: evolutionary
search over named text components with a Pareto pool of candidates over the validation instances.

- :mod:`.kind`: the registration (:class:`~.kind.GepaKind`): methods, pool, deployable candidate, evaluation.
- :mod:`.settings`: its settings (:class:`~.settings.GepaConfig`, ``learners.gepa``; the
  pipeline's :class:`~.settings.PipelineConfig`) and its flags.
- :mod:`.pool`: :class:`~.pool.GepaState`, the pool as the run loop carries it.
- :mod:`.iteration`: GEPA's step (parent, minibatch, reflection, acceptance, validation) as a
  :class:`~combee_fast.protocols.Method`.
- :mod:`.pipeline`: stage-decoupled GEPA (``async-gepa``): proposals in flight through the stages,
  in simulated time, as a :class:`~combee_fast.protocols.Method`.
- :mod:`.stages`: the stages of one proposal (grade, reflect, aggregate, screen, validate).
- :mod:`.staleness`: what happens to a child the pool moved past (``full``, ``guarded``).
- :mod:`.delays`: the environment's real seconds on the pipeline's time, along what each task waited for.
- :mod:`.budget`: the metric-call budget reserved at dispatch.
- :mod:`.planner`: the live planner (minibatch, reflection groups, proposals in flight).
- :mod:`.measure`: what one iteration measured, for the planner.
- :mod:`.stops`: the metric-call budget as a stop rule.
- :mod:`.candidate`: the deployable artifact, named text components.
- :mod:`.pareto`: the Pareto candidate pool (dominance, parent sampling by front membership).
- :mod:`.calls`: the three role calls (solve = one metric call, propose = reflection, aggregate).
- :mod:`.learner`: the proposer and merger that Combee's reduce tree calls; its edit type.
- :mod:`.reflection`: how a child's text is proposed: serial (one call) or Combee (shuffled
  groups, all in flight, then the aggregation tree).
- :mod:`.revisions`: line changes of rewrites, kept by reference when aggregated (or rebased).
- :mod:`.online`: :class:`~.online.GepaOnline`, the learner of rollouts submitted online (their
  rows reflected on and aggregated), and what it learns, :class:`~.online.OnlineCandidate`.
- :mod:`.interop`: Combee's reflection as a strategy for the PyPI ``gepa`` package's own loop.
- :mod:`.sim`: how the simulated endpoint answers the three roles (the kind's ``responders``).

Prompts are in ``gepa/prompts/``, one file per role and message.
"""
