"""The streaming engine's small parts.

- :mod:`.stream`: an async function over indexed items through a bounded queue, results by index.
- :mod:`.rng`: one seeded RNG tree per run, every draw addressed by a path.
- :mod:`.timing`: critical-path time of items run by a pool of workers.
- :mod:`.virtual`: stages with in-flight limits advanced in simulated time (a discrete-event schedule).
- :mod:`.loop`: the event loop (uvloop when installed).
- :mod:`.frames`: length-prefixed frames over a child process's pipes.
- :mod:`.child_variables`: what a child process inherits of our environment (an allow-list, no secrets).
- :mod:`.reaper`: runs a command so that nothing it starts outlives it or the engine.
- :mod:`.child`: the one supervisor of worker processes: start, frames both ways, how it ended, stop.
- :mod:`.kept`: typed snapshots of an object's working state (for checkpoints).
- :mod:`.slow_wait`: a wait that takes noticeably long is said when it begins and when it ends.
- :mod:`.events`: the event hub, and the events emitted below the run loop (endpoints, role calls, rollouts).
"""
