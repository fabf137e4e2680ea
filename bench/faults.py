"""Nothing lost, nothing silent: Formula, Combee, batch 40, on the simulated endpoint.

    python bench/faults.py

1. a clean run and a run with 10% of each fault kind at once (429, 500, dropped connections,
   malformed and truncated replies), in process, each checked for
   - lost rollouts: every train example must have exactly one first attempt (round 0) in exactly
     one step's traces, answered or reported failed;
   - unaccounted calls: every request the simulated server counted must be in the run's
     accounting as a call or a retry (learning steps and validation);
2. a ``combee learn`` process killed with SIGKILL at a random step and resumed with
   ``combee learn --resume``; its ``final.json`` is compared byte for byte with the clean run's.

Last line: ``lost_rollouts=<n> unaccounted_calls=<n> resume_identical=<0|1> acc_clean=<a> acc_faults=<b>``
(the counts summed over both runs; accuracies over the answered validation examples).
"""

from __future__ import annotations

import argparse
import collections
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from combee_fast import flags
from combee_fast.cli import build_parser
from combee_fast.config import FAULT_KINDS
from combee_fast.engine.loop import run
from combee_fast.run.rundir import RunDir
from combee_fast.run.train import TrainResult
from combee_fast.session import open_session

RUN = ["--task", "formula", "--method", "combee", "--batch-size", "40"]
FAULTS = [arg for kind in ("429", "500", "drop", "malformed", "truncated") for arg in (f"--fault-{kind}", "0.1")]


class _Watched:
    """The method, with the item of every first attempt (round 0) in its steps' traces counted."""

    def __init__(self, method: Any) -> None:
        self.method = method
        self.name = method.name
        self.batches_span_epochs = method.batches_span_epochs
        self.first_attempts: collections.Counter[str] = collections.Counter()

    async def start(self, artifact: Any) -> Any:
        return await self.method.start(artifact)

    def pending(self) -> int:
        return self.method.pending()

    def carried(self) -> Any:
        return self.method.carried()

    async def resume(self, carried: Any, items: Any) -> None:
        await self.method.resume(carried, items)

    async def step(self, items: Sequence[Any], artifact: Any, *, epoch: int, step: int, shape: Any = None) -> Any:
        result = await self.method.step(items, artifact, epoch=epoch, step=step, shape=shape)
        for trace in result.traces:
            self.first_attempts.update(trace.item_id for rollout in trace.rollouts if rollout.round == 0)
        return result


async def _checked_run(argv: list[str], out: Path | None) -> tuple[TrainResult, int, int]:
    """Train in process as ``combee learn argv`` would; ``(result, lost rollouts, unaccounted calls)``."""
    args = build_parser().parse_args(["learn", *argv])
    config = flags.session_config(args)
    async with open_session(config) as session:
        method = _Watched(session.method())
        run_dir = RunDir(out) if out is not None else None
        try:
            result = await session.train(method=method, run_dir=run_dir)
        finally:
            if run_dir is not None:
                run_dir.close()
        requests = session.server.counters().requests
    ids = [item.id for item in session.train_items()]
    lost = sum(1 for item_id in ids if method.first_attempts[item_id] != 1)
    lost += sum(1 for item_id in method.first_attempts if item_id not in set(ids))
    accounted = sum(_calls_and_retries(counts) for counts in (result.counts, result.val_counts))
    return result, lost, requests - accounted


def _calls_and_retries(counts: Any) -> int:
    return sum(counts.calls.values()) + sum(n for kinds in counts.retries.values() for n in kinds.values())


def _ledger_lines(out: Path) -> int:
    try:
        return len((out / "ledger.jsonl").read_bytes().splitlines())
    except FileNotFoundError:
        return 0


def _kill_and_resume(out: Path, steps: int, rng: random.Random) -> int:
    """SIGKILL a ``combee learn`` once a random step is in its ledger, resume it; the step."""
    at_step = rng.randint(1, steps - 1)
    command = [sys.executable, "-m", "combee_fast.cli", "learn"]
    process = subprocess.Popen([*command, *RUN, "--out", str(out), "--quiet"], stdout=subprocess.DEVNULL)
    while _ledger_lines(out) < at_step and process.poll() is None:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    subprocess.run([*command, "--resume", str(out), "--quiet"], check=True, stdout=subprocess.DEVNULL)
    return at_step


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=None, help="seed of the kill step (default: random)")
    args = parser.parse_args(argv)
    assert set(FAULT_KINDS) >= {"429", "500", "drop", "malformed", "truncated"}
    with tempfile.TemporaryDirectory(prefix="combee-faults-") as folder:
        root = Path(folder)
        clean, lost_clean, unaccounted_clean = run(_checked_run(RUN, root / "clean"))
        faults, lost_faults, unaccounted_faults = run(_checked_run([*RUN, *FAULTS], None))
        for name, result, lost, unaccounted in (("clean", clean, lost_clean, unaccounted_clean),
                                                ("faults", faults, lost_faults, unaccounted_faults)):
            kinds = {role: dict(k) for role, k in result.counts.errors.items()}
            retries = {role: dict(k) for role, k in result.counts.retries.items()}
            print(f"{name:<7} steps {result.steps}  calls {result.calls}  val {result.final_eval.accuracy:.3f} "
                  f"({result.final_eval.unanswered} unanswered)  lost {lost}  unaccounted {unaccounted}  "
                  f"failed {kinds}  retried {retries}", flush=True)
        at_step = _kill_and_resume(root / "resumed", clean.steps, random.Random(args.seed))
        identical = (root / "resumed" / "final.json").read_bytes() == (root / "clean" / "final.json").read_bytes()
        print(f"killed (SIGKILL) at step {at_step} of {clean.steps}, resumed: final.json "
              f"{'identical' if identical else 'DIFFERENT'}", flush=True)
    print(f"lost_rollouts={lost_clean + lost_faults} unaccounted_calls={unaccounted_clean + unaccounted_faults} "
          f"resume_identical={int(identical)} acc_clean={clean.final_eval.accuracy:.4g} "
          f"acc_faults={faults.final_eval.accuracy:.4g}")


if __name__ == "__main__":
    main()
