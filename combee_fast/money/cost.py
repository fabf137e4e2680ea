"""GPU-seconds of a run's steps: what the hardware spent, beside the tokens and rollouts.

A :class:`GpuClock` reads cumulative GPU-seconds; a step costs the difference of two readings
around it. On the simulated endpoint it reads the simulated server's busy time (simulated seconds
with a sequence running, :meth:`combee_fast.sim.server.SimServer.busy_s`) times ``gpus``; on a
real endpoint, the wall time of the steps times the ``gpus`` declared for it. With no declared
GPU count on a real endpoint the cost is unknown (``None``), never guessed.
"""

from __future__ import annotations

from collections.abc import Callable

SIMULATED_GPUS = 1
"""GPUs one simulated server stands for when none are declared (each preset models one server)."""


class GpuClock:
    """Cumulative GPU-seconds: ``busy_s() * gpus`` when a busy-time source is given, else
    ``wall_s * gpus`` (the steps' wall time, passed in by the caller)."""

    def __init__(self, gpus: int, busy_s: Callable[[], float] | None = None) -> None:
        if gpus < 1:
            raise ValueError(f"gpus must be >= 1, got {gpus}")
        self.gpus = gpus
        self._busy_s = busy_s

    @property
    def source(self) -> str:
        """Where the seconds come from: ``simulated busy time`` or ``wall time``."""
        return "simulated busy time" if self._busy_s is not None else "wall time"

    def read(self, wall_s: float) -> float:
        """GPU-seconds so far; ``wall_s`` is the run's step wall time so far."""
        return (self._busy_s() if self._busy_s is not None else wall_s) * self.gpus
