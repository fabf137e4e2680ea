"""The simulated endpoint: a yardstick, not a target.

- :mod:`.server`: :class:`~.server.SimServer`, a real OpenAI-compatible HTTP server on loopback,
  with fault injection (:class:`~combee_fast.config.FaultConfig`) and counters.
- :mod:`.fault_draws`: which fault a request gets, drawn from the request itself (not from the
  order requests arrive in).
- :mod:`.latency`: the continuous-batching latency model and its presets.
- :mod:`.responders`: the responder protocols (a whole responder; one role's,
  :data:`~.responders.RoleResponder`), echo and template responders.
- :mod:`.world`: the task world, a deterministic model of the failure Combee fixes: the knowledge
  (units, parameters, draws) and a table of responders by request role (calibrated by
  ``python bench/calibrate_world.py``).
- :mod:`.ace`, :mod:`.instructions`, :mod:`.textgrad`: ACE's, GEPA's and TextGrad's responders.
- :mod:`.terminal`: the terminal task's world, in which the endpoint plays the agent (opt-in: that
  task only), its own responders registered over the built-in ones.
- :mod:`.tau2`: the tau2 tasks' world, in which the endpoint plays the agent and the customer
  (opt-in: those tasks only).
- :mod:`.worlds`: one task's world as the in-process endpoint plays it (every built-in learner's
  roles), or several behind one server.
- :mod:`.peers`: replies to other learners' prompts (the peers bench).
- :mod:`.spans`: depth and peak concurrency of a set of requests.
- :mod:`.cli`: the ``sim-server`` subcommand.
"""
