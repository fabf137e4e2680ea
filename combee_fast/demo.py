"""``combee demo``: sequential ACE, naive batching and Combee on Formula, side by side.

Everything runs in this process: the simulated endpoint (``flat`` latency preset, the yardstick
ACE's 28.7 s and 5.35 calls per sample were measured on) plays the task world. Times are simulated
seconds on the critical path; accuracy is each final playbook's on the held-out Formula test
split (report only; the runs select on ``selection``), with its 95% interval. A page
(``report.md``: a plot of each method's accuracy on :data:`VALIDATION_SPLIT` through its run
against simulated time, ending in its test score; role separation, provenance, and each method
against sequential ACE paired on the test rows) and an index are written into ``out``, each
method's test scores in a folder of its own (``out/<method>/``: ``eval.json``, ``results.jsonl``,
for ``combee compare --paired``), and the page's path printed last.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import msgspec
import numpy as np

from combee_fast.config import SessionConfig, SimConfig, TaskConfig
from combee_fast.files import write_atomic
from combee_fast.methods.base import EvalResult
from combee_fast.native.proportion import ScoreInterval, score_interval
from combee_fast.native.proportion import paired_comparison
from combee_fast.readout.report import answered_interval
from combee_fast.readout.scored import RESULTS_FILE, comparison_lines, result_rows
from combee_fast.record.provenance import provenance
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.run.train import TrainResult
from combee_fast.schema import Example
from combee_fast.session import open_session
from combee_fast.tasks.heldout import check_use
from combee_fast.verify.cells import pools_of, served_by
from combee_fast.verify.report import demo_report

DEMO_RUNS = (("sequential", 1), ("naive", 100), ("combee", 40))
TEST_SPLIT = "test"
"""What the demo scores the final playbooks on: held out, report only."""
VALIDATION_SPLIT = "selection[0:100]"
"""What the demo's runs validate on, as any run does by default (each time it has spent another
quarter of its training: the page's curves): half of Formula's 200 ``selection`` rows, so the
demo's twelve validations add about 0.4 s to its 9.5 s (all 200 rows: 1.4 s; 2 cores at load 2.5)."""


def _table(results: list[tuple[str, int, TrainResult, ScoreInterval]]) -> str:
    baseline = results[0][2].train_sim_seconds
    header = f"{'method':<11}{'batch':>6}{'sim time':>12}{'speedup':>9}{'test acc':>9}{'entries':>9}{'LLM calls':>11}{'tokens':>12}"
    lines = [header, "-" * len(header)]
    for method, batch, result, score in results:
        accuracy = score.mean
        lines.append(
            f"{method:<11}{batch:>6}{result.train_sim_seconds / 3600:>10.2f} h"
            f"{baseline / max(result.train_sim_seconds, 1e-9):>8.1f}x{100 * accuracy:>8.1f}%"
            f"{len(result.artifact):>9}{result.calls:>11,}{result.tokens:>12,}"
        )
    return "\n".join(lines)


async def run_demo(*, train_limit: int = 500, time_scale: float = 2e-4,
                   out: str | Path | None = None) -> list[tuple[str, int, TrainResult, ScoreInterval]]:
    """Train each demo method on the first ``train_limit`` Formula train rows, score its final
    playbook on the test split; print the table; write the page into ``out`` (default
    ``runs/demo-<date-time>``) and print its path."""
    config = SessionConfig(
        task=TaskConfig(train_split=f"train[0:{train_limit}]", val_split=VALIDATION_SPLIT),
        sim=SimConfig(preset="flat", time_scale=time_scale),
    )
    results, scores = [], []
    started = time.perf_counter()
    record = provenance(seed=config.seed)
    async with open_session(config) as session:
        test = session.task.load(TEST_SPLIT)
        check_use(session.task, TEST_SPLIT, "report")
        record = msgspec.structs.replace(record, splits=(session.train_split.manifest, session.val_split.manifest,
                                                         test.manifest))
        print(f"Formula: {len(session.train_split.examples)} train / {len(session.val_split.examples)} selection / "
              f"{len(test.examples)} test examples; simulated endpoint, flat latency preset", file=sys.stderr)
        for method, batch in DEMO_RUNS:
            result = await session.train(method=method, plan=FixedBatch(batch))
            scored = await session.evaluate(result.final, test.examples)
            interval = answered_interval(scored) or score_interval(scored.scores)
            print(f"  {method:<10} done in {time.perf_counter() - started:5.1f} s real time", file=sys.stderr)
            results.append((method, batch, result, interval))
            scores.append(scored)
    print(_table(results))
    folder = Path(out or f"runs/demo-{time.strftime('%Y%m%d-%H%M%S')}")
    for (method, _, _, interval), scored in zip(results, scores):
        _write_scores(folder / method, test.examples, scored, interval)
    page = demo_report(folder, results, split=TEST_SPLIT, val_split=config.task.val_split,
                       models=served_by(config), pools=pools_of(config),
                       use_ground_truth=config.use_ground_truth, scorer=f"the {session.task.name} task's success metric",
                       record=record, paired=_paired(results, scores))
    print(f"report: {page}")
    return results


def _write_scores(folder: Path, examples: tuple[Example, ...], scored: EvalResult, interval: ScoreInterval) -> None:
    """One method's test scores as an evaluation folder: ``eval.json`` and ``results.jsonl``."""
    folder.mkdir(parents=True, exist_ok=True)
    summary = {"split": TEST_SPLIT, "learner": "ace", "examples": scored.examples, "accuracy": scored.accuracy,
               "answered": scored.answered, "unanswered": scored.unanswered,
               "interval": msgspec.to_builtins(interval)}
    write_atomic(folder / "eval.json", msgspec.json.encode(summary))
    write_atomic(folder / RESULTS_FILE, b"".join(msgspec.json.encode(row) + b"\n"
                                                 for row in result_rows(examples, scored)))


def _paired(results: list[tuple[str, int, TrainResult, ScoreInterval]], scores: list[EvalResult]) -> list[str]:
    """Each method against the first (sequential) on the test rows both answered."""
    answered = [np.array([o[1] is None for o in s.outcomes]) if s.outcomes else np.ones(s.examples, bool)
                for s in scores]
    compared = []
    for (method, *_), s, mask in zip(results[1:], scores[1:], answered[1:]):
        both = mask & answered[0]
        if both.any():
            compared.append((f"{method} - {results[0][0]}",
                             paired_comparison(np.asarray(s.scores)[both], np.asarray(scores[0].scores)[both])))
    return comparison_lines("method", results[0][0], compared, what="methods") if compared else []
