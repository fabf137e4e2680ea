"""Nothing lost, nothing silent: Formula, Combee, batch 40, on the simulated endpoint.

    python bench/faults.py
    python bench/faults.py --train-split "train[0:280]" --val-split "selection[0:40]" --corruptions 20   # smaller

1. a clean run and a run with 10% of each fault kind at once (429, 500, dropped connections,
   malformed and truncated replies), in process, each checked for
   - lost rollouts: every train example must have exactly one first attempt (round 0) in exactly
     one step's traces, answered or reported failed;
   - unaccounted calls: every request the simulated server counted must be in the run's
     accounting as a call or a retry (learning steps and validation), or be one of the client's
     resends (a request sent again on a fresh connection after the server closed a reused one
     before answering, as a dropped connection does: ``Session.resent``);
2. a ``combee learn`` process killed with SIGKILL at a random step and resumed by two
   ``combee learn --resume`` processes started at once: one must be refused (exit 2, the run is
   in use), the other must end with the clean run's ``final.json``, byte for byte, and as many
   ledger rows;
3. ``--corruptions`` random corruptions (1 to 3 bytes changed) of the clean run's real
   checkpoint, each loaded as a resume would: none may load.

Last line: ``lost_rollouts=<n> unaccounted_calls=<n> resume_identical=<0|1> concurrent_resume_refused=<0|1>
corrupt_checkpoints_loaded=<n> corruptions=<n> acc_clean=<a> acc_faults=<b>`` (the counts summed over
both runs; accuracies over the answered validation examples).
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
from combee_fast.config import FAULT_KINDS, TaskConfig
from combee_fast.engine.loop import run
from combee_fast.record.rundir import RunDir
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

    def carried_type(self, artifact_type: Any) -> Any:
        return self.method.carried_type(artifact_type)

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
        resent = session.resent
    ids = [item.id for item in session.train_items()]
    lost = sum(1 for item_id in ids if method.first_attempts[item_id] != 1)
    lost += sum(1 for item_id in method.first_attempts if item_id not in set(ids))
    accounted = sum(_calls_and_retries(counts) for counts in (result.counts, result.val_counts))
    return result, lost, requests - accounted - resent


def _calls_and_retries(counts: Any) -> int:
    return sum(counts.calls.values()) + sum(n for kinds in counts.retries.values() for n in kinds.values())


def _ledger_lines(out: Path) -> int:
    try:
        return len((out / "ledger.jsonl").read_bytes().splitlines())
    except FileNotFoundError:
        return 0


def _kill_and_resume_twice(learn: list[str], out: Path, steps: int, rng: random.Random) -> tuple[int, bool]:
    """SIGKILL a ``combee learn`` once a random step is in its ledger, then start two resumes of
    it at once; ``(the step, whether exactly one was refused as in use and the other finished)``."""
    at_step = rng.randint(1, steps - 1)
    command = [sys.executable, "-m", "combee_fast.cli", "learn"]
    process = subprocess.Popen([*command, *learn, "--out", str(out), "--quiet"], stdout=subprocess.DEVNULL)
    while _ledger_lines(out) < at_step and process.poll() is None:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    resumes = [subprocess.Popen([*command, "--resume", str(out), "--quiet"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    ended = [(resume.wait(), resume.stderr.read()) for resume in resumes]  # type: ignore[union-attr]
    codes = sorted(code for code, _ in ended)
    refused = codes == [0, 2] and any(code == 2 and "in use by another combee process" in err for code, err in ended)
    return at_step, refused


def _corruptions_loaded(run_dir: Path, n: int, rng: random.Random) -> int:
    """How many of ``n`` random 1-3 byte corruptions of ``run_dir``'s checkpoint load as a resume
    would load them (header, checksum, then the typed state of the run's learner, plan and method)."""
    from combee_fast.ace.kind import ACE
    from combee_fast.errors import CheckpointError
    from combee_fast.methods.combee import CarriedChains
    from combee_fast.ace.playbook import Playbook
    from combee_fast.record.checkpoint import CHECKPOINT_FILE, read_checkpoint

    good = (run_dir / CHECKPOINT_FILE).read_bytes()
    read_checkpoint(run_dir).state(ACE, method="combee", plan_state_type=type(None),
                                   carried_type=CarriedChains[Playbook] | None)  # the real one loads
    loaded = 0
    with tempfile.TemporaryDirectory(prefix="combee-corrupt-") as folder:
        copy = Path(folder)
        for _ in range(n):
            data = bytearray(good)
            for _ in range(rng.randint(1, 3)):
                data[rng.randrange(len(data))] ^= rng.randint(1, 255)  # always a change
            (copy / CHECKPOINT_FILE).write_bytes(bytes(data))
            try:
                read_checkpoint(copy).state(ACE, method="combee", plan_state_type=type(None),
                                            carried_type=CarriedChains[Playbook] | None)
            except CheckpointError:
                continue
            loaded += 1
    return loaded


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=None, help="seed of the kill step and corruptions (default: random)")
    parser.add_argument("--corruptions", type=int, default=400, help="random corruptions of a real checkpoint")
    parser.add_argument("--train-split", default=TaskConfig().train_split,
                        help="the runs' train split (at least two steps of 40)")
    parser.add_argument("--val-split", default=TaskConfig().val_split, help="the runs' validation split")
    args = parser.parse_args(argv)
    learn = [*RUN, "--train-split", args.train_split, "--val-split", args.val_split]
    assert set(FAULT_KINDS) >= {"429", "500", "drop", "malformed", "truncated"}
    with tempfile.TemporaryDirectory(prefix="combee-faults-") as folder:
        root = Path(folder)
        clean, lost_clean, unaccounted_clean = run(_checked_run(learn, root / "clean"))
        faults, lost_faults, unaccounted_faults = run(_checked_run([*learn, *FAULTS], None))
        for name, result, lost, unaccounted in (("clean", clean, lost_clean, unaccounted_clean),
                                                ("faults", faults, lost_faults, unaccounted_faults)):
            kinds = {role: dict(k) for role, k in result.counts.errors.items()}
            retries = {role: dict(k) for role, k in result.counts.retries.items()}
            print(f"{name:<7} steps {result.steps}  calls {result.calls}  val {result.final_eval.accuracy:.3f} "
                  f"({result.final_eval.unanswered} unanswered)  lost {lost}  unaccounted {unaccounted}  "
                  f"failed {kinds}  retried {retries}", flush=True)
        rng = random.Random(args.seed)
        at_step, refused = _kill_and_resume_twice(learn, root / "resumed", clean.steps, rng)
        identical = (root / "resumed" / "final.json").read_bytes() == (root / "clean" / "final.json").read_bytes()
        rows_match = _ledger_lines(root / "resumed") == _ledger_lines(root / "clean")
        print(f"killed (SIGKILL) at step {at_step} of {clean.steps}, resumed by two processes at once: "
              f"{'one refused' if refused else 'NOT ONE REFUSED'}, final.json {'identical' if identical else 'DIFFERENT'}, "
              f"ledger rows {'as clean' if rows_match else 'DIFFERENT'}", flush=True)
        loaded = _corruptions_loaded(root / "clean", args.corruptions, rng)
        print(f"{args.corruptions} random corruptions of the clean run's checkpoint: {loaded} loaded", flush=True)
    print(f"lost_rollouts={lost_clean + lost_faults} unaccounted_calls={unaccounted_clean + unaccounted_faults} "
          f"resume_identical={int(identical and rows_match)} concurrent_resume_refused={int(refused)} "
          f"corrupt_checkpoints_loaded={loaded} corruptions={args.corruptions} "
          f"acc_clean={clean.final_eval.accuracy:.4g} acc_faults={faults.final_eval.accuracy:.4g}")


if __name__ == "__main__":
    main()
