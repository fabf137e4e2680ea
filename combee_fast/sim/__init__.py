"""The simulated endpoint: a yardstick, not a target.

- :mod:`.server`: :class:`~.server.SimServer`, a real OpenAI-compatible HTTP server on loopback,
  with fault injection (:class:`~combee_fast.config.FaultConfig`) and counters.
- :mod:`.fault_draws`: which fault a request gets, drawn from the request itself (not from the
  order requests arrive in).
- :mod:`.latency`: the continuous-batching latency model and its presets.
- :mod:`.responders`: the responder protocols (a whole responder; one role's,
  :data:`~.responders.RoleResponder`), echo and template responders.
- :mod:`.world`: the task world, a deterministic model of the failure Combee fixes: the knowledge
  (units, parameters, draws, the lessons it teaches, how it judges an attempt) and a table of
  responders by request role (calibrated by ``python bench/calibrate_world.py``). The learners'
  responders are theirs (each kind's ``responders``, e.g. :mod:`combee_fast.ace.sim`), gathered by
  the learner registry (:func:`combee_fast.learners.role_table`) and handed down: this package
  imports no learner.
- :mod:`.instructed`: a learned instruction as the world reads it (its lesson lines, an answer
  under it) and how a call revising one overloads: shared by the learners whose context is plain
  text.
- :mod:`.agent_world`: what every world in which the endpoint plays the agent shares.
- :mod:`.terminal`: the terminal task's world, in which the endpoint plays the agent in every
  serving role (that task's ``sim_world``).
- :mod:`.finer`: the FiNER task's world: the calibrated world in FiNER's own words (that task's
  ``sim_world``).
- :mod:`.tau2`: the tau2 tasks' world, in which the endpoint plays the agent and the customer
  (those tasks' ``sim_world``).
- :mod:`.worlds`: one task's world as the in-process endpoint plays it (the one the task names,
  answering the role table it is handed), or several behind one server.
- :mod:`.peers`: replies to other learners' prompts (the peers bench).
- :mod:`.spans`: depth and peak concurrency of a set of requests.
- :mod:`.cli`: the ``sim-server`` subcommand.
"""
