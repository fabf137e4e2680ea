"""Agents in environments: each learner's serial method against its parallel ones on the terminal task.

    python bench/agents.py                      # ACE: sequential vs Combee vs naive batching
    python bench/agents.py --learner gepa       # serial GEPA vs async-gepa (and combee-gepa)
    python bench/agents.py --learner textgrad   # serial TextGrad vs combee-textgrad (and naive-textgrad)
    python bench/agents.py --batch-size 40 --naive-batch-size 40 --executor process

Each method learns on the terminal task's train split (one pass), selects on its selection split
(GEPA: its Pareto set), and its final context is scored on the test split (report only). The
built-in ReAct agent acts in bubblewrap sandboxes; the simulated endpoint plays it
(:mod:`combee_fast.sim.terminal`): ACE's playbook is its ``<learned_context>``, GEPA's candidate
and TextGrad's prompt variable its ``<instructions>``. Times are each run's critical path: the
model's simulated seconds plus the environment's real seconds. Sequential ACE keeps one episode
in flight and runs at a finer time scale (its model latency does not depend on load); every other
run at ``--time-scale``.

ACE (the default): the sandbox's start and teardown are measured apart, on the test split's
chores, each run by its oracle twice in turn: in a sandbox session (start, commands, final state,
close) and as bare ``sh -c`` subprocesses in a scratch folder where sandboxes keep their host-side
files (files written, commands, folder read, removed); the overhead is the mean of the per-chore
differences. ``sandbox_overhead_ms`` is measured with the default ``sandbox.warm`` (the next
sandbox starts while an episode runs, so its start is off the next episode's path),
``sandbox_cold_ms`` with ``warm = 0`` (every sandbox started when its episode asks for it): the
machine does the same work in both; only where the start waits differs.

GEPA: serial ``gepa`` (``gepa.minibatch`` examples an iteration, one reflection call) against
``async-gepa`` (``--batch-size`` examples a proposal, Combee's reflection, stages decoupled, up to
``--proposals`` in flight, as many tasks of each stage), and the synchronous ``combee-gepa`` at
the same minibatch for reference; one pass over train each (``gepa.max_epochs = 1``, no
metric-call budget in reach). ``async-gepa`` merges here (``gepa.pipeline.merge``: siblings as
they join, and, once the search drains, the candidates tied at the best validation score), and
its defaults are 20 examples a proposal and 8 proposals in flight: the same 160 examples in
flight as 40 and 4, but each child's lessons screened and merged in smaller steps (chosen from a
sweep at seed 0, docs/agents.md).
TextGrad: ``textgrad`` (one optimizer step per example) against ``combee-textgrad`` at
``--batch-size``, and ``naive-textgrad`` at ``--naive-batch-size`` for reference. The bench
refuses (exit 1) a run whose episodes failed or that did not go once over the train split.

Last line, ACE: ``speedup=<sequential/combee> acc_sequential=<test %> acc_combee=<test %>
acc_naive=<test %> sandbox_overhead_ms=<ms per episode> rollouts_per_s=<combee episodes per wall s>
sandbox_cold_ms=<ms per episode, no warm sandbox>``. GEPA: ``speedup=<gepa/async-gepa>
acc_gap=<serial test - async test, a fraction> acc_serial=<test %> acc_async=<test %>
acc_sync=<combee-gepa test %> sync_speedup=<gepa/combee-gepa> rollouts_per_s=<async episodes per
wall s>``. TextGrad: ``speedup=<textgrad/combee-textgrad> acc_gap=<serial test - combee test, a
fraction> acc_serial=<test %> acc_combee=<test %> acc_naive=<test %> rollouts_per_s=<combee episodes
per wall s>``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from combee_fast.config import (ExecutorConfig, MapConfig, SandboxConfig, SessionConfig,
                                SimConfig, TaskConfig, TrainConfig)
from combee_fast.engine.loop import run
from combee_fast.gepa.settings import GepaConfig, PipelineConfig
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.run.train import TrainResult
from combee_fast.sandbox.scratch import scratch_folder
from combee_fast.sandbox.sessions import Sandboxes
from combee_fast.session import open_session
from combee_fast.tasks.terminal.chores import Chore
from combee_fast.tasks.terminal.task import TerminalTask
from physics import check_baseline, guarded

SERIAL_TIME_SCALE = 1e-3
UNLIMITED = 10**9
BATCH = 40  # Combee's batch (ACE, TextGrad)
GEPA_BATCH, GEPA_PROPOSALS = 20, 8  # async-gepa's minibatch and proposals in flight (module docstring)


class Run:
    """One measured run: its name, batch (None: the learner's configured minibatch), result and
    the test accuracy (%) of its final context."""

    def __init__(self, name: str, batch: int | None, result: TrainResult, accuracy: float) -> None:
        self.name, self.batch, self.result, self.accuracy = name, batch, result, accuracy


async def _learn(config: SessionConfig, name: str, batch: int | None) -> Run:
    """Train ``config``'s method at ``batch`` (None: the learner's own plan); score its final
    context on the test split."""
    async with open_session(config) as session:
        plan = FixedBatch(batch) if batch is not None else None
        result = await session.train(plan=plan)
        test = session.task.load("test").examples
        scored = await session.evaluate(result.final, test)
        train = len(session.train_split.examples)
    _check(name, result, train)
    return Run(name, batch, result, 100 * scored.accuracy)


def _check(name: str, result: TrainResult, train: int) -> None:
    """The bench's assumptions about one run: its episodes all ran, and it went once over train
    (GEPA's last minibatch may run on into the next pass, as GEPA's do)."""
    sizes = [row.batch_size for row in result.ledger if row.batch_reason != "start"]
    seen = sum(sizes)
    problem = None
    if not result.episodes:
        problem = "ran no agent episode"
    elif result.episodes_failed:
        problem = f"{result.episodes_failed} of its {result.episodes} episodes failed"
    elif not train <= seen < train + max(sizes):
        problem = f"learned from {seen} train items, not one pass over {train}"
    if problem is not None:
        sys.exit(f"bench/agents.py: {name} {problem}; its figures would not compare")


async def _sandboxed(sandboxes: Sandboxes, chore: Chore) -> float:
    started = time.perf_counter()
    session = await sandboxes.open(chore.setup())
    try:
        for command in chore.oracle:
            await session.run(command, timeout_s=sandboxes.step_timeout_s)
        await session.final_state()
    finally:
        await session.close()
    return time.perf_counter() - started


def _bare(chore: Chore) -> tuple[float, int]:
    """Seconds of ``chore``'s oracle commands run bare, and how many of them exited 0."""
    ok = 0
    started = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="combee-bare-", dir=scratch_folder()))  # where sandboxes keep theirs
    try:
        for spec in chore.files:
            path = folder / spec.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(spec.data())
            os.utime(path, (time.time() - spec.age_s,) * 2)
        for command in chore.oracle:
            done = subprocess.run(["/bin/sh", "-c", command], cwd=folder, stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(folder)})
            ok += done.returncode == 0
        for path in folder.rglob("*"):
            if path.is_file():
                path.read_bytes()
    finally:
        shutil.rmtree(folder)
    return time.perf_counter() - started, ok


async def sandbox_overhead_ms(config: SandboxConfig, step_timeout_s: float) -> float:
    """Mean per-episode milliseconds a sandbox adds to the same oracle commands run bare, on the
    episode's path (with ``config.warm``, the next sandbox starts while this episode runs)."""
    async with Sandboxes(config, step_timeout_s=step_timeout_s, uid_count=4) as sandboxes:
        await sandboxes.check()
        task = TerminalTask()
        chores = [task.chore(example) for example in task.load("test").examples]
        differences = []
        for chore in chores:
            sandboxed = await _sandboxed(sandboxes, chore)
            bare, ok = await asyncio.to_thread(_bare, chore)
            check_baseline(f"bare run of chore {chore.id!r}", bare, done=ok, expected=len(chore.oracle))
            differences.append(sandboxed - bare)
    return 1000 * statistics.fmean(differences)


def _config(args: argparse.Namespace, method: str, time_scale: float, **learner: Any) -> SessionConfig:
    return SessionConfig(learner=args.learner, method=method, seed=args.seed,
                         task=TaskConfig(name="terminal", train_split="train", val_split="selection"),
                         train=TrainConfig(epochs=1), map=MapConfig(workers=args.workers),
                         executor=ExecutorConfig(backend=args.executor), sim=SimConfig(args.preset, time_scale),
                         **learner)


def _gepa(args: argparse.Namespace) -> dict[str, Any]:
    """GEPA's settings: one pass over train, the budget out of reach, ``--proposals`` in flight
    (and as many tasks of each stage)."""
    n = args.proposals
    pipeline = PipelineConfig(proposals=n, grade=n, reflect=n, aggregate=n, screen=n, validate=n, merge=True)
    return {"learners": {"gepa": GepaConfig(combee_minibatch=args.batch_size, max_metric_calls=UNLIMITED, max_epochs=1,
                                            pipeline=pipeline)}}


async def compare(args: argparse.Namespace) -> dict[str, Run]:
    """Every run of ``args.learner``'s comparison, by method, and its table on stdout."""
    if args.learner == "gepa":
        runs = [await _learn(_config(args, "gepa", args.time_scale, **_gepa(args)), "gepa", None),
                await _learn(_config(args, "async-gepa", args.time_scale, **_gepa(args)), "async-gepa", None),
                await _learn(_config(args, "combee-gepa", args.time_scale, **_gepa(args)), "combee-gepa", None)]
    elif args.learner == "textgrad":
        runs = [await _learn(_config(args, "textgrad", args.time_scale), "textgrad", 1),
                await _learn(_config(args, "combee-textgrad", args.time_scale), "combee-textgrad", args.batch_size),
                await _learn(_config(args, "naive-textgrad", args.time_scale), "naive-textgrad", args.naive_batch_size)]
    else:
        runs = [await _learn(_config(args, "sequential", SERIAL_TIME_SCALE), "sequential", 1),
                await _learn(_config(args, "combee", args.time_scale), "combee", args.batch_size),
                await _learn(_config(args, "naive", args.time_scale), "naive", args.naive_batch_size)]
    print(f"terminal task, learner {args.learner}, preset {args.preset}, seed {args.seed}, executor {args.executor}; "
          "critical path = model (simulated) + environment (real) seconds", file=sys.stderr)
    unit = {"ace": "entries", "gepa": "lines", "textgrad": "lines"}[args.learner]
    print(f"{'method':<16}{'batch':>6}{'path s':>10}{'env s':>9}{'episodes':>9}{'failed':>7}{'test %':>8}"
          f"{unit:>8}{'wall s':>8}")
    for r in runs:
        result = r.result
        batch = r.batch if r.batch is not None else max(row.batch_size for row in result.ledger)
        print(f"{r.name:<16}{batch:>6}{result.train_sim_seconds:>10,.0f}{result.env_seconds:>9.1f}"
              f"{result.episodes:>9}{result.episodes_failed:>7}{r.accuracy:>8.1f}{_size(result):>8}"
              f"{result.train_wall_seconds:>8.1f}")
    return {r.name: r for r in runs}


def _size(result: TrainResult) -> int:
    """The final context's size: ACE's entries, TextGrad's prompt lines, the lines of GEPA's candidate."""
    final = result.final
    return len(final) if hasattr(final, "__len__") else sum(1 for line in final.render().splitlines() if line.strip())


def _rate(run: Run) -> float:
    return run.result.episodes / run.result.train_wall_seconds


def main() -> int:
    return guarded(_main, "bench/agents.py")


def _main() -> None:
    parser = argparse.ArgumentParser(description="Each learner's serial method against its parallel ones on the "
                                                 "terminal task")
    parser.add_argument("--learner", default="ace", choices=("ace", "gepa", "textgrad"))
    parser.add_argument("--batch-size", type=int, default=None,
                        help=f"Combee's batch size (default {BATCH}; GEPA: async-gepa's and combee-gepa's "
                             f"minibatch, default {GEPA_BATCH})")
    parser.add_argument("--naive-batch-size", type=int, default=40)
    parser.add_argument("--proposals", type=int, default=GEPA_PROPOSALS,
                        help="async-gepa: proposals in flight, and each stage's tasks in flight")
    parser.add_argument("--workers", type=int, default=40, help="episodes at once (the executor's capacity)")
    parser.add_argument("--executor", default="local", choices=("local", "process"))
    parser.add_argument("--preset", default="h200-70b")
    parser.add_argument("--time-scale", type=float, default=0.01, help="for every run but sequential ACE")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.batch_size is None:
        args.batch_size = GEPA_BATCH if args.learner == "gepa" else BATCH
    if args.learner != "ace":
        runs = run(compare(args))
        serial, parallel, other = runs.values()
        print(f"load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
        speedup = serial.result.train_sim_seconds / parallel.result.train_sim_seconds
        gap = (serial.accuracy - parallel.accuracy) / 100
        if args.learner == "gepa":
            print(f"speedup={speedup:.2f} acc_gap={gap:.3f} acc_serial={serial.accuracy:.1f} "
                  f"acc_async={parallel.accuracy:.1f} acc_sync={other.accuracy:.1f} "
                  f"sync_speedup={serial.result.train_sim_seconds / other.result.train_sim_seconds:.2f} "
                  f"rollouts_per_s={_rate(parallel):.1f}")
        else:
            print(f"speedup={speedup:.2f} acc_gap={gap:.3f} acc_serial={serial.accuracy:.1f} "
                  f"acc_combee={parallel.accuracy:.1f} acc_naive={other.accuracy:.1f} "
                  f"rollouts_per_s={_rate(parallel):.1f}")
        return
    overhead = run(sandbox_overhead_ms(SandboxConfig(), ExecutorConfig().step_timeout_s))
    cold = run(sandbox_overhead_ms(SandboxConfig(warm=0), ExecutorConfig().step_timeout_s))
    runs = run(compare(args))
    seq, comb, naive = runs["sequential"], runs["combee"], runs["naive"]
    print(f"load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print(
        f"speedup={seq.result.train_sim_seconds / comb.result.train_sim_seconds:.2f} acc_sequential={seq.accuracy:.1f} "
        f"acc_combee={comb.accuracy:.1f} acc_naive={naive.accuracy:.1f} sandbox_overhead_ms={overhead:.1f} "
        f"rollouts_per_s={_rate(comb):.1f} sandbox_cold_ms={cold:.1f}"
    )


if __name__ == "__main__":
    sys.exit(main())
