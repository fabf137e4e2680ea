"""How long does online learning stall the host's event loop?

An agent server embeds :class:`OnlineLearner`; its own requests wait whenever our work holds the
event loop. This submits ``--rollouts`` rollouts to an online learner (the simulated endpoint
runs in a separate process, as a real server would) while a ticker coroutine measures how late
its 1 ms sleeps wake up. It runs twice side by side: as is, and after ``gc.freeze()`` (which moves
the objects alive after start-up, task data included, out of the collector's reach).

    python bench/loop_lag.py --rollouts 2000
Last line: ``lag_p99_ms=<> lag_max_ms=<> lag_max_ms_frozen=<> gc_max_ms=<> gc_max_ms_frozen=<>``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import subprocess
import sys
import time

import msgspec

from combee_fast.engine.loop import run
from combee_fast.config import EndpointSpec, OnlineConfig, SessionConfig
from combee_fast.run.online import OnlineLearner
from combee_fast.playbook import Playbook
from combee_fast.session import open_session


class _GcPauses:
    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append(time.perf_counter() - self._started)


async def measure(url: str, rollouts: int, *, freeze: bool) -> tuple[list[float], float]:
    pauses = _GcPauses()
    async with open_session(SessionConfig(endpoints={"default": EndpointSpec(url, "sim")})) as session:
        seeds = [await session.agents.generate(e, "", epoch=0) for e in session.train_split.examples[:100]]
        batch = [msgspec.structs.replace(seeds[i % 100], round=i // 100) for i in range(rollouts)]
        if freeze:
            gc.freeze()
        gc.callbacks.append(pauses)
        lags: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            while not done.is_set():
                started = time.perf_counter()
                await asyncio.sleep(0.001)
                lags.append(time.perf_counter() - started - 0.001)

        ticking = asyncio.create_task(ticker())
        async with OnlineLearner(session.agents, Playbook.empty(), OnlineConfig(batch_size=64, max_wait_s=0.05)) as learner:
            tickets = await asyncio.gather(*(learner.submit(r) for r in batch))
            await asyncio.gather(*tickets)
        done.set()
        await ticking
        gc.callbacks.remove(pauses)
    if freeze:
        gc.unfreeze()
    return sorted(lags), max(pauses.pauses, default=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description="event-loop stalls during online learning")
    parser.add_argument("--rollouts", type=int, default=2000)
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0", "--world", "formula",
         "--preset", "flat", "--time-scale", "0.001"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        url = server.stdout.readline().split()[2]  # type: ignore[union-attr]
        lags, gc_max = run(measure(url, args.rollouts, freeze=False))
        frozen, gc_frozen = run(measure(url, args.rollouts, freeze=True))
    finally:
        server.terminate()
        server.wait(timeout=30)
    for name, values in (("as is", lags), ("gc.freeze()", frozen)):
        print(f"{name:>12}: {len(values)} ticks, lag p50 {1e3 * values[len(values) // 2]:.2f} ms, "
              f"p99 {1e3 * values[int(len(values) * 0.99)]:.2f} ms, max {1e3 * values[-1]:.2f} ms")
    print(f"lag_p99_ms={1e3 * lags[int(len(lags) * 0.99)]:.2f} lag_max_ms={1e3 * lags[-1]:.2f} "
          f"lag_max_ms_frozen={1e3 * frozen[-1]:.2f} gc_max_ms={1e3 * gc_max:.2f} gc_max_ms_frozen={1e3 * gc_frozen:.2f}")


if __name__ == "__main__":
    main()
