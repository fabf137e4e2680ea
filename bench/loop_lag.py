"""How long does online learning stall the host's event loop, and what do submit and read cost?

An agent server embeds the online learner; its own requests wait whenever our work holds its
event loop. This submits ``--rollouts`` rollouts (in chunks of ``--chunk``, yielding between
chunks, as a server finishing rollouts would) while a ticker coroutine measures how late its 1 ms
sleeps wake up and, at each tick, times one read of the current playbook. Every ``submit`` is
timed too. The simulated endpoint runs in a separate process, as a real server would. The
learner's work is the same in every mode: batches of 64 closing after 50 ms, and a queue large
enough that no submit waits for room (so ``submit`` times its cost, not backpressure).

Modes, run one after the other, each in a fresh interpreter, against one server (never ``gc.freeze()``):
    threaded  :class:`~combee_fast.embedded.threaded.ThreadedLearner` (the learner on its own loop and
              thread); the read is ``learner.text``, the rendered latest version
    process   :class:`~combee_fast.embedded.process.ProcessLearner` (the learner in a child process);
              the read is ``learner.text``
    inloop    :class:`~combee_fast.embedded.online.OnlineLearner` on the host's loop (the learner's work on the host's thread);
              the read is ``learner.artifact``
    idle      the ticker alone (``--idle-seconds``), no learner: the lag floor of the machine as
              loaded at that moment (other processes, the CPU scheduler), for comparison

    python bench/loop_lag.py --rollouts 2000
Last line (process figures unprefixed, then ``threaded_...``, ``inloop_...``, ``idle_...``):
``lag_p99_ms=<> lag_max_ms=<> read_p99_us=<> submit_p99_us=<> gc_max_ms=<> threaded_lag_p99_ms=<> ... inloop_lag_p99_ms=<>
inloop_lag_max_ms=<> inloop_read_p99_us=<> inloop_submit_p99_us=<> inloop_gc_max_ms=<>
idle_lag_p99_ms=<> idle_lag_max_ms=<> server_priority=<idle|normal>``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import subprocess
import sys
import time
from typing import Any

import msgspec

from combee_fast.ace.calls import AceCalls
from combee_fast.config import EndpointSpec, OnlineConfig, SessionConfig, EmbedConfig
from combee_fast.engine.loop import run
from combee_fast.ace.playbook import Playbook
from combee_fast.embedded.online import OnlineLearner
from combee_fast.embedded.process import ProcessLearner
from combee_fast.embedded.threaded import ThreadedLearner
from combee_fast.session import open_session

MODES = ("process", "threaded", "inloop", "idle")


class GcPauses:
    """A gc callback recording each collection's pause in seconds."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append(time.perf_counter() - self._started)


class Figures(msgspec.Struct):
    """Sorted samples of one mode, in seconds."""

    mode: str
    lags: list[float]
    reads: list[float]
    submits: list[float]
    gc_max: float
    batches: int

    @staticmethod
    def p(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


async def measure_idle(seconds: float) -> Figures:
    """The ticker alone for ``seconds``: the lag floor of the machine as loaded right now."""
    lags: list[float] = []
    clock = time.perf_counter
    end = clock() + seconds
    while clock() < end:
        started = clock()
        await asyncio.sleep(0.001)
        lags.append(clock() - started - 0.001)
    return Figures("idle", sorted(lags), [], [], 0.0, 0)


async def measure(url: str, rollouts: int, mode: str, chunk: int, thread: EmbedConfig) -> Figures:
    pauses = GcPauses()
    async with open_session(SessionConfig(endpoints={"default": EndpointSpec(url, "sim")})) as session:
        seeds = [await AceCalls(session.calls).generate(e, "", epoch=0) for e in session.train_split.examples[:100]]
        batch = [msgspec.structs.replace(seeds[i % 100], round=i // 100) for i in range(rollouts)]
        config = OnlineConfig(batch_size=64, max_wait_s=0.05, queue_size=max(rollouts, 1))
        learner: Any
        if mode == "threaded":
            learner = ThreadedLearner(session.calls, Playbook.empty(), config, embed=thread)
        elif mode == "process":
            learner = ProcessLearner(session.calls, Playbook.empty(), config, embed=thread)
        else:
            learner = OnlineLearner(session.calls, Playbook.empty(), config)
        lags: list[float] = []
        reads: list[float] = []
        submits: list[float] = []
        done = asyncio.Event()

        def read() -> object:
            return learner.artifact if mode == "inloop" else learner.text

        async def ticker() -> None:
            clock = time.perf_counter
            while not done.is_set():
                started = clock()
                await asyncio.sleep(0.001)
                lags.append(clock() - started - 0.001)
                before = clock()
                read()
                reads.append(clock() - before)

        async with learner:  # started: measure from here (start-up is not the learner's work)
            gc.callbacks.append(pauses)
            ticking = asyncio.create_task(ticker())
            tickets = []
            clock = time.perf_counter
            for start in range(0, len(batch), chunk):
                for rollout in batch[start:start + chunk]:
                    before = clock()
                    tickets.append(await learner.submit(rollout))
                    submits.append(clock() - before)
                await asyncio.sleep(0)
            await asyncio.gather(*tickets)
        done.set()
        await ticking
        gc.callbacks.remove(pauses)
    return Figures(mode, sorted(lags), sorted(reads), sorted(submits), max(pauses.pauses, default=0.0),
                   len(learner.batches))


def _embed(args: argparse.Namespace) -> EmbedConfig:
    embed = EmbedConfig()
    if args.switch_interval is not None:
        embed = msgspec.structs.replace(embed, switch_interval_s=args.switch_interval or None)
    return embed


def _server_at_idle_priority() -> None:
    """In the sim-server's child, before it runs: every thread it starts inherits SCHED_IDLE."""
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def main() -> None:
    parser = argparse.ArgumentParser(description="event-loop stalls, read and submit cost during online learning")
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--chunk", type=int, default=32, help="submits between two yields of the host")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated: process,threaded,inloop,idle")
    parser.add_argument("--server-priority", choices=("idle", "normal"), default="idle",
                        help="CPU priority of the simulated server's process (see the module doc)")
    parser.add_argument("--idle-seconds", type=float, default=3.0, help="length of the idle mode's run")
    parser.add_argument("--switch-interval", type=float, help="threaded mode: EmbedConfig.switch_interval_s "
                        "(0 keeps the interpreter's; default: EmbedConfig's)")
    parser.add_argument("--url", help=argparse.SUPPRESS)  # internal: one mode in this process, JSON out
    args = parser.parse_args()
    if args.url is not None:
        mode = args.modes
        figures = run(measure_idle(args.idle_seconds) if mode == "idle" else
                      measure(args.url, args.rollouts, mode, args.chunk, _embed(args)))
        print(msgspec.json.encode(figures).decode())
        return
    modes = [m for m in args.modes.split(",") if m]
    server = subprocess.Popen(
        [sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0", "--world", "formula",
         "--preset", "flat", "--time-scale", "0.001"],
        stdout=subprocess.PIPE, text=True,
        preexec_fn=_server_at_idle_priority if args.server_priority == "idle" else None,
    )
    try:
        url = server.stdout.readline().split()[2]  # type: ignore[union-attr]
        figures = {}
        for mode in modes:  # each in a fresh interpreter: no mode inherits another's heap or imports
            argv = [sys.executable, __file__, "--url", url, "--modes", mode, "--rollouts", str(args.rollouts),
                    "--chunk", str(args.chunk), "--idle-seconds", str(args.idle_seconds)]
            if args.switch_interval is not None:
                argv += ["--switch-interval", str(args.switch_interval)]
            out = subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True).stdout
            figures[mode] = msgspec.json.decode(out.strip().splitlines()[-1], type=Figures)
    finally:
        server.terminate()
        server.wait(timeout=30)
    p = Figures.p
    keys = []
    for mode, f in figures.items():
        if mode == "idle":
            print(f"{mode:>9}: {len(f.lags)} ticks, lag p50 {1e3 * p(f.lags, 0.5):.2f} ms, "
                  f"p99 {1e3 * p(f.lags, 0.99):.2f} ms, max {1e3 * f.lags[-1]:.2f} ms")
            keys += [f"idle_lag_p99_ms={1e3 * p(f.lags, 0.99):.2f}", f"idle_lag_max_ms={1e3 * f.lags[-1]:.2f}"]
            continue
        print(f"{mode:>9}: {len(f.lags)} ticks, lag p50 {1e3 * p(f.lags, 0.5):.2f} ms, p99 {1e3 * p(f.lags, 0.99):.2f} ms, "
              f"max {1e3 * f.lags[-1]:.2f} ms; read p99 {1e6 * p(f.reads, 0.99):.2f} us; "
              f"submit p50 {1e6 * p(f.submits, 0.5):.1f} us, p99 {1e6 * p(f.submits, 0.99):.1f} us, "
              f"max {1e6 * f.submits[-1]:.0f} us; gc max {1e3 * f.gc_max:.2f} ms; {f.batches} batches")
        prefix = "" if mode == "process" else f"{mode}_"
        keys += [f"{prefix}lag_p99_ms={1e3 * p(f.lags, 0.99):.2f}", f"{prefix}lag_max_ms={1e3 * f.lags[-1]:.2f}",
                 f"{prefix}read_p99_us={1e6 * p(f.reads, 0.99):.2f}", f"{prefix}submit_p99_us={1e6 * p(f.submits, 0.99):.1f}",
                 f"{prefix}gc_max_ms={1e3 * f.gc_max:.2f}"]
    print(" ".join(keys + [f"server_priority={args.server_priority}"]))


if __name__ == "__main__":
    main()
