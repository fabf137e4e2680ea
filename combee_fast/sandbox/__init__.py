"""Sandboxes for the commands an agent runs: a fresh working directory per episode, no network,
a read-only system, a scrubbed environment and limits, or (``--sandbox none``) plain processes
for trusted commands.

- :mod:`.limits`: what one command may use (CPU, memory, processes, file size, output, disk),
  and the uids sandboxes run as under root.
- :mod:`.launch`: starting a sandbox's process cheaply (``posix_spawn`` of ``prlimit``, ``setpriv``
  and the sandbox), and awaiting it.
- :mod:`.classify`: which limit or wall a failed command ran into (``process_limit``,
  ``disk_full``, ``network_denied``...), as one error kind.
- :mod:`.state`: the working directory as files: set-up archives in, final state out (read
  safely: nothing outside it, no link followed).
- :mod:`.scratch`: the sandboxes' host-side folders, and the sweep of those killed processes left.
- :mod:`.bwrap`: a bubblewrap session: one sandbox per episode, a command runner inside it.
- :mod:`.seccomp`: the sandbox's system-call filter (no System V shared memory).
- :mod:`.trusted`: the same session contract without isolation (``mode = "none"``).
- :mod:`.sessions`: :class:`~.sessions.Sandboxes`, where an environment gets its sessions (the
  mode, the limits, the uids of a pool), and the check that the isolation tool works here.
"""
