"""Agents in environments: sequential ACE vs Combee vs naive batching on the terminal task.

    python bench/agents.py
    python bench/agents.py --batch-size 40 --naive-batch-size 40 --executor process

Each method learns on the terminal task's train split (one epoch), selects on its selection split,
and its final context is scored on the test split (report only). The built-in ReAct agent acts
in bubblewrap sandboxes; the simulated endpoint plays it (:mod:`combee_fast.sim.terminal`).
Times are each run's critical path: the model's simulated seconds plus the environment's real
seconds. Sequential ACE keeps one episode in flight and runs at a finer time scale (its model
latency does not depend on load); the batched methods run at ``--time-scale``.

The sandbox's start and teardown are measured apart, on the test split's chores, each run by its
oracle twice in turn: in a sandbox session (start, commands, final state, close) and as bare
``sh -c`` subprocesses in a scratch folder where sandboxes keep their host-side files (files
written, commands, folder read, removed); the overhead is the mean of the per-chore differences.
``sandbox_overhead_ms`` is measured with the default ``sandbox.warm`` (the next sandbox starts
while an episode runs, so its start is off the next episode's path), ``sandbox_cold_ms`` with
``warm = 0`` (every sandbox started when its episode asks for it): the machine does the same work
in both; only where the start waits differs.

Last line: ``speedup=<sequential/combee> acc_sequential=<test %> acc_combee=<test %>
acc_naive=<test %> sandbox_overhead_ms=<ms per episode> rollouts_per_s=<combee episodes per wall s>
sandbox_cold_ms=<ms per episode, no warm sandbox>``.
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

from combee_fast.config import (ExecutorConfig, MapConfig, SandboxConfig, SessionConfig, SimConfig, TaskConfig,
                                TrainConfig)
from combee_fast.engine.loop import run
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.run.train import TrainResult
from combee_fast.sandbox.scratch import scratch_folder
from combee_fast.sandbox.sessions import Sandboxes
from combee_fast.session import open_session
from combee_fast.tasks.terminal.chores import Chore
from combee_fast.tasks.terminal.task import TerminalTask

SERIAL_TIME_SCALE = 1e-3


async def _learn(config: SessionConfig, method: str, batch: int) -> tuple[TrainResult, float]:
    """Train ``method`` at ``batch``; its result and its test accuracy (%)."""
    async with open_session(config) as session:
        result = await session.train(method=method, plan=FixedBatch(batch))
        test = session.task.load("test").examples
        scored = await session.evaluate(result.final, test)
    return result, 100 * scored.accuracy


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


def _bare(chore: Chore) -> float:
    started = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="combee-bare-", dir=scratch_folder()))  # where sandboxes keep theirs
    try:
        for spec in chore.files:
            path = folder / spec.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(spec.data())
            os.utime(path, (time.time() - spec.age_s,) * 2)
        for command in chore.oracle:
            subprocess.run(["/bin/sh", "-c", command], cwd=folder, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(folder)})
        for path in folder.rglob("*"):
            if path.is_file():
                path.read_bytes()
    finally:
        shutil.rmtree(folder)
    return time.perf_counter() - started


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
            bare = await asyncio.to_thread(_bare, chore)
            differences.append(sandboxed - bare)
    return 1000 * statistics.fmean(differences)


async def compare(args: argparse.Namespace) -> dict[str, tuple[TrainResult, float]]:
    def config(method: str, time_scale: float) -> SessionConfig:
        return SessionConfig(method=method, seed=args.seed,
                             task=TaskConfig(name="terminal", train_split="train", val_split="selection"),
                             train=TrainConfig(epochs=1), map=MapConfig(workers=args.workers),
                             executor=ExecutorConfig(backend=args.executor),
                             sim=SimConfig(args.preset, time_scale))

    runs = {
        "sequential": await _learn(config("sequential", SERIAL_TIME_SCALE), "sequential", 1),
        "combee": await _learn(config("combee", args.time_scale), "combee", args.batch_size),
        "naive": await _learn(config("naive", args.time_scale), "naive", args.naive_batch_size),
    }
    print(f"terminal task, preset {args.preset}, seed {args.seed}, executor {args.executor}; critical path = model "
          "(simulated) + environment (real) seconds", file=sys.stderr)
    print(f"{'method':<11}{'batch':>6}{'path s':>10}{'env s':>9}{'episodes':>9}{'failed':>7}{'test %':>8}"
          f"{'entries':>8}{'wall s':>8}")
    batches = {"sequential": 1, "combee": args.batch_size, "naive": args.naive_batch_size}
    for name, (result, accuracy) in runs.items():
        print(f"{name:<11}{batches[name]:>6}{result.train_sim_seconds:>10,.0f}{result.env_seconds:>9.1f}"
              f"{result.episodes:>9}{result.episodes_failed:>7}{accuracy:>8.1f}{len(result.final):>8}"
              f"{result.train_wall_seconds:>8.1f}")
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description="Sequential ACE vs Combee vs naive on the terminal task")
    parser.add_argument("--batch-size", type=int, default=40, help="Combee's batch size")
    parser.add_argument("--naive-batch-size", type=int, default=40)
    parser.add_argument("--workers", type=int, default=40, help="episodes at once (the executor's capacity)")
    parser.add_argument("--executor", default="local", choices=("local", "process"))
    parser.add_argument("--preset", default="h200-70b")
    parser.add_argument("--time-scale", type=float, default=0.01, help="for the batched methods")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    overhead = run(sandbox_overhead_ms(SandboxConfig(), ExecutorConfig().step_timeout_s))
    cold = run(sandbox_overhead_ms(SandboxConfig(warm=0), ExecutorConfig().step_timeout_s))
    runs = run(compare(args))
    (seq, acc_seq), (comb, acc_comb), (_, acc_naive) = runs["sequential"], runs["combee"], runs["naive"]
    print(f"load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print(
        f"speedup={seq.train_sim_seconds / comb.train_sim_seconds:.2f} acc_sequential={acc_seq:.1f} "
        f"acc_combee={acc_comb:.1f} acc_naive={acc_naive:.1f} sandbox_overhead_ms={overhead:.1f} "
        f"rollouts_per_s={comb.episodes / comb.train_wall_seconds:.1f} sandbox_cold_ms={cold:.1f}"
    )


if __name__ == "__main__":
    main()
