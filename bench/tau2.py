"""tau2-bench retail: sequential ACE against Combee and naive batching, serial GEPA against async-gepa,
and the MCP layer's overhead per tool call.

    python bench/tau2.py                       # everything below (retail, seed 0)
    python bench/tau2.py --skip-gepa           # ACE only
    python bench/tau2.py --skip-ace            # GEPA only
    python bench/tau2.py --domain airline
    python bench/tau2.py --skip-ace --merge    # async-gepa with gepa.pipeline.merge on
    python bench/tau2.py --skip-ace --no-speculate  # async-gepa screening, then validating, as GEPA does

Each method learns on the domain's train split (one pass), selects on the train split itself
(tau2 has no selection split of its own; GEPA's own default, given no validation set, is its
train set; ``--selection selection`` selects on the same rows as examples of their own, seeded
apart) and its final context is scored on the test split (report only). The built-in ReAct
agent acts on the domain's real MCP server (one server process per episode, through the
official ``mcp`` SDK client) and talks to the customer (the ``user`` role); the simulated
endpoint plays both (:mod:`combee_fast.sim.tau2`); tau2's checker scores. Times are each run's
critical path: the model's simulated seconds, the customer's simulated seconds and the tools'
real seconds. Sequential ACE keeps one episode in flight at a finer time scale (its model
latency does not depend on load); every other run at ``--time-scale``.
async-gepa speculates (``gepa.pipeline.speculate``: its minibatches are validation examples, so
a child's screening begins its validation; ``--no-speculate``: screened, then validated, as
serial GEPA does); serial GEPA never does.

``mcp_overhead_ms``: the mean milliseconds one tool call costs through the MCP server (a real
process, a session, its per-key state), less the same tool function called in this process on an
in-memory database, over ``--calls`` calls of ``get_order_details`` (retail) or
``get_reservation_details`` (airline) after one warm-up.

Last line: ``speedup=<sequential/combee> acc_gap=<sequential test - combee test, a fraction>
acc_sequential=<test %> acc_combee=<test %> acc_naive=<test %> naive_speedup=<sequential/naive>
mcp_overhead_ms=<ms per call> gepa_speedup=<gepa/async-gepa> gepa_speedup_limit=<the highest
gepa_speedup any schedule could give here> gepa_acc_gap=<gepa test - async test, a fraction>`` (the
ACE figures and ``rollouts_per_s=<combee episodes per wall s>`` absent with
``--skip-ace``, the gepa figures with ``--skip-gepa``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from typing import Any

from combee_fast.config import (AgentConfig, ExecutorConfig, MapConfig, SandboxConfig,
                                SessionConfig, SimConfig, TaskConfig, TrainConfig)
from combee_fast.engine.loop import run
from combee_fast.gepa.settings import GepaConfig, PipelineConfig
from combee_fast.engine.timing import finish_times
from combee_fast.mcp.client import McpConnection
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.run.train import TrainResult
from combee_fast.session import open_session
from combee_fast.tasks.tau2.domain import domain as tau2_domain
from physics import WrongWorld, check_baseline, guarded, physical_ratio

SERIAL_TIME_SCALE = 1e-3
UNLIMITED = 10**9
BATCH = 40
GEPA_BATCH, GEPA_PROPOSALS = 20, 8
MAX_STEPS = 24  # the longest gold path (13 actions), telling the customer, finishing, with room
PROBES = {"retail": ("get_order_details", {"order_id": "#W2378156"}),
          "airline": ("get_reservation_details", {"reservation_id": "EHGLP3"})}


class Run:
    """One measured run: its name, batch (None: the learner's own), result and test accuracy (%)."""

    def __init__(self, name: str, batch: int | None, result: TrainResult, accuracy: float) -> None:
        self.name, self.batch, self.result, self.accuracy = name, batch, result, accuracy


def _check(name: str, result: TrainResult, train: int) -> None:
    """Every episode ran, and the run went once over train (GEPA's last minibatch may run on)."""
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
        sys.exit(f"bench/tau2.py: {name} {problem}; its figures would not compare")


async def _learn(config: SessionConfig, name: str, batch: int | None) -> Run:
    async with open_session(config) as session:
        result = await session.train(plan=FixedBatch(batch) if batch is not None else None)
        scored = await session.evaluate(result.final, session.task.load("test").examples)
        train = len(session.train_split.examples)
    _check(name, result, train)
    return Run(name, batch, result, 100 * scored.accuracy)


def _config(args: argparse.Namespace, learner: str, method: str, time_scale: float, **extra: Any) -> SessionConfig:
    return SessionConfig(learner=learner, method=method, seed=args.seed,
                         task=TaskConfig(name=f"tau2-{args.domain}", train_split="train", val_split=args.selection),
                         train=TrainConfig(epochs=1), map=MapConfig(workers=args.workers),
                         agent=AgentConfig(max_steps=MAX_STEPS), executor=ExecutorConfig(backend=args.executor),
                         sandbox=SandboxConfig(mode="none"), sim=SimConfig(args.preset, time_scale), **extra)


def _gepa(args: argparse.Namespace) -> dict[str, Any]:
    n = args.proposals
    pipeline = PipelineConfig(proposals=n, grade=n, reflect=n, aggregate=n, screen=n, validate=n, merge=args.merge,
                              speculate=not args.no_speculate)
    return {"learners": {"gepa": GepaConfig(combee_minibatch=GEPA_BATCH, max_metric_calls=UNLIMITED, max_epochs=1,
                                            pipeline=pipeline)}}


async def mcp_overhead_ms(name: str, calls: int) -> float:
    """Mean ms per tool call through the MCP server less the same tool function in-process."""
    dom = tau2_domain(name)
    tool, arguments = PROBES[name]
    import tempfile

    with tempfile.TemporaryDirectory(prefix="combee-bench-mcp-") as scratch:
        connection = McpConnection(dom.server_argv, env={**os.environ, dom.state_dir_variable: scratch}, cwd=scratch)
        await connection.open()
        try:
            keyed = {**arguments, "state_key": f"tau2/{name}/bench"}
            await connection.call("reset_state", {"domain": name, "task_id": "bench", "state_key": keyed["state_key"]},
                                  timeout_s=30)
            first = await connection.call(tool, keyed, timeout_s=30)  # warm-up (the server loads its database)
            ok = 0
            started = time.perf_counter()
            for _ in range(calls):
                result = await connection.call(tool, keyed, timeout_s=30)
                ok += not result.is_error
            over_mcp = (time.perf_counter() - started) / calls
        finally:
            await connection.close()
    check_baseline(f"MCP calls of {tool}", over_mcp, done=ok + (not first.is_error), expected=calls + 1)
    db = dom.fresh_db()
    dom.run_tool(db, tool, arguments)
    started = time.perf_counter()
    for _ in range(calls):
        dom.run_tool(db, tool, arguments)
    in_process = (time.perf_counter() - started) / calls
    print(f"{tool}: {1e3 * over_mcp:.2f} ms per call over MCP, {1e3 * in_process:.3f} ms in-process",
          file=sys.stderr)
    return 1e3 * (over_mcp - in_process)


def gepa_speedup_limit(serial: Run, fast: Run, workers: int) -> float:
    """The most ``gepa_speedup`` can be on this selection split: the serial path over the one task
    async-gepa's search cannot end before, the seed's validation (every candidate joins the pool
    after it), at its model seconds alone (its pool keeps them per validation instance)."""
    seconds = fast.result.artifact.seconds_of(0)
    seed = max(finish_times(seconds, workers), default=0.0) if seconds else 0.0
    if seed <= 0:
        raise WrongWorld("async-gepa's pool holds no seed validation with a path: no limit to check against")
    return serial.result.train_sim_seconds / seed


def _table(title: str, runs: list[Run]) -> None:
    print(title, file=sys.stderr)
    print(f"{'method':<14}{'batch':>6}{'path s':>10}{'env s':>9}{'episodes':>9}{'failed':>7}{'test %':>8}"
          f"{'wall s':>8}")
    for r in runs:
        result = r.result
        batch = r.batch if r.batch is not None else max(row.batch_size for row in result.ledger)
        print(f"{r.name:<14}{batch:>6}{result.train_sim_seconds:>10,.0f}{result.env_seconds:>9.1f}"
              f"{result.episodes:>9}{result.episodes_failed:>7}{r.accuracy:>8.1f}{result.train_wall_seconds:>8.1f}")


async def compare(args: argparse.Namespace) -> dict[str, Run]:
    head = (f"tau2-{args.domain}, preset {args.preset}, seed {args.seed}, executor {args.executor}; critical path = "
            "model and customer (simulated) + tools (real) seconds")
    print(head, file=sys.stderr)
    runs: dict[str, Run] = {}
    if not args.skip_ace:
        ace = [await _learn(_config(args, "ace", "sequential", SERIAL_TIME_SCALE), "sequential", 1),
               await _learn(_config(args, "ace", "combee", args.time_scale), "combee", args.batch_size),
               await _learn(_config(args, "ace", "naive", args.time_scale), "naive", args.naive_batch_size)]
        _table("ACE", ace)
        runs.update({r.name: r for r in ace})
    if not args.skip_gepa:
        gepa = [await _learn(_config(args, "gepa", "gepa", args.time_scale, **_gepa(args)), "gepa", None),
                await _learn(_config(args, "gepa", "async-gepa", args.time_scale, **_gepa(args)), "async-gepa", None)]
        _table("GEPA", gepa)
        runs.update({r.name: r for r in gepa})
    return runs


def main() -> int:
    return guarded(_main, "bench/tau2.py")


def _main() -> None:
    parser = argparse.ArgumentParser(description="tau2-bench: Combee against sequential ACE, async-gepa against "
                                                 "GEPA, and the MCP overhead per tool call")
    parser.add_argument("--domain", default="retail", choices=("retail", "airline"))
    parser.add_argument("--batch-size", type=int, default=BATCH)
    parser.add_argument("--naive-batch-size", type=int, default=BATCH)
    parser.add_argument("--proposals", type=int, default=GEPA_PROPOSALS)
    parser.add_argument("--workers", type=int, default=40, help="episodes at once (the executor's capacity)")
    parser.add_argument("--executor", default="local", choices=("local", "process"))
    parser.add_argument("--preset", default="h200-70b")
    parser.add_argument("--time-scale", type=float, default=0.01, help="for every run but sequential ACE")
    parser.add_argument("--calls", type=int, default=200, help="tool calls the MCP overhead is measured over")
    parser.add_argument("--skip-gepa", action="store_true")
    parser.add_argument("--skip-ace", action="store_true")
    parser.add_argument("--selection", default="train",
                        help="the split runs select on (default: the train split itself, as GEPA does given no "
                             "validation set); 'selection' holds the same rows as examples of their own, seeded apart; "
                             "e.g. 'selection[0:20]'")
    parser.add_argument("--merge", action="store_true",
                        help="async-gepa merges the siblings that joined while a child was made, and the tied best "
                             "at the end (gepa.pipeline.merge: each merge is one more validation on its path)")
    parser.add_argument("--no-speculate", action="store_true",
                        help="async-gepa screens a child, then validates it once accepted (gepa.pipeline.speculate "
                             "off, its default); by default here its screening begins its validation when the "
                             "minibatch's examples are validation examples (a rejected child's other validation "
                             "episodes are then spent)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    overhead = run(mcp_overhead_ms(args.domain, args.calls))
    runs = run(compare(args))
    path = lambda r: r.result.train_sim_seconds  # noqa: E731
    print(f"load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    figures = f"mcp_overhead_ms={overhead:.2f}"
    if not args.skip_ace:
        seq, comb, naive = runs["sequential"], runs["combee"], runs["naive"]
        figures = (f"speedup={path(seq) / path(comb):.2f} acc_gap={(seq.accuracy - comb.accuracy) / 100:.3f} "
                   f"acc_sequential={seq.accuracy:.1f} acc_combee={comb.accuracy:.1f} "
                   f"acc_naive={naive.accuracy:.1f} naive_speedup={path(seq) / path(naive):.2f} {figures}")
        figures += f" rollouts_per_s={comb.result.episodes / comb.result.train_wall_seconds:.1f}"
    if not args.skip_gepa:
        gepa, fast = runs["gepa"], runs["async-gepa"]
        speedup, limit = path(gepa) / path(fast), gepa_speedup_limit(gepa, fast, args.workers)
        physical_ratio("gepa_speedup/gepa_speedup_limit", speedup / limit)
        figures += (f" gepa_speedup={speedup:.2f} gepa_speedup_limit={limit:.2f} "
                    f"gepa_acc_gap={(gepa.accuracy - fast.accuracy) / 100:.3f}")
    print(figures)


if __name__ == "__main__":
    sys.exit(main())
