"""The simulated endpoint: a yardstick, not a target.

- :mod:`.server`: :class:`~.server.SimServer`, a real OpenAI-compatible HTTP server on loopback,
  with fault injection (:class:`~combee_fast.config.FaultConfig`) and counters.
- :mod:`.latency`: the continuous-batching latency model and its presets.
- :mod:`.responders`: echo and template responders.
- :mod:`.world`: the task world, a deterministic model of the failure Combee fixes that plays
  all four roles from the prompt (calibrated by ``python bench/calibrate_world.py``).
- :mod:`.instructions`: the task world plus the GEPA roles.
- :mod:`.worlds`: one task's world as the in-process endpoint plays it, or several behind one server.
- :mod:`.peers`: replies to other learners' prompts (the peers bench).
- :mod:`.spans`: depth and peak concurrency of a set of requests.
- :mod:`.cli`: the ``sim-server`` subcommand.
"""
