"""``combee compare RUN...``: runs side by side, then the same configuration across its seeds.

Each run is read from its files (:func:`~combee_fast.record.rundir.read_run`): its configuration,
summary and the evaluations kept inside it (``RUN/eval-*/eval.json``, the latest per split) or
the evaluation it is itself. :func:`compare_lines` is one Markdown table with a row per run
(task, learner and method, seed, validation accuracy, each evaluated split's accuracy (a split
of another task than the run's named with its task, ``finer test``), each score with its exact
95% interval (:func:`~combee_fast.native.proportion.clopper_pearson`), rollouts, tokens,
candidates explored and accepted, tokens per accepted improvement
(:mod:`~combee_fast.money.improvements`), dollars and dollars per accepted improvement
(:mod:`~combee_fast.money.dollars`; unknown without prices), critical-path and wall seconds, how it
ended), then, for every configuration run under more than one seed, the mean and standard deviation of each score over its seeds.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from combee_fast.errors import ConfigError
from combee_fast.money.dollars import money
from combee_fast.native.proportion import DEFAULT_LEVEL, clopper_pearson
from combee_fast.record.rundir import RunRecord, read_run

_NOT_THE_CONFIGURATION = ("seed", "endpoints", "cache", "tracking")
"""Configuration fields that do not make two runs different configurations in the seed table."""


class Compared(msgspec.Struct, frozen=True):
    """One run as the comparison shows it; ``scores``: split -> accuracy; ``intervals``: split ->
    the accuracy's 95% interval (a split without one: an evaluation that predates them)."""

    name: str
    task: str
    method: str
    seed: int | None
    scores: dict[str, float]
    intervals: dict[str, tuple[float, float]]
    rollouts: int | None
    tokens: int | None
    explored: int | None
    accepted: int | None
    tokens_per_improvement: float | None
    dollars: str  # as shown (money/dollars.py); empty for a run that predates prices
    dollars_per_improvement: str
    sim_seconds: float | None
    wall_seconds: float | None
    ended: str
    configuration: str


def file_sha256(path: str | Path) -> str | None:
    """The SHA-256 of a file's bytes (None when it cannot be read)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _task(config: Mapping[str, Any] | None) -> str | None:
    """The task a run's ``config.json`` names (None: not said)."""
    task = (config or {}).get("task", {})
    return task.get("name") if isinstance(task, Mapping) else None


def evaluations(record: RunRecord) -> dict[str, tuple[Path, Mapping[str, Any]]]:
    """split -> (folder, ``eval.json``) of the run's own evaluation and of those kept inside it
    (latest wins; an evaluation of a file the run no longer holds, e.g. after ``--overwrite``, is
    left out). A split of a task other than the run's is named with its task (``finer test``)."""
    root, task = Path(record.root), _task(record.config)
    found: dict[str, tuple[Path, Mapping[str, Any]]] = {}
    for folder in sorted(root.glob("eval-*")):
        try:
            kept = read_run(folder)
        except ConfigError:
            continue
        evaluated = (kept.evaluation or {}).get("playbook")
        if kept.evaluation is not None and evaluated is not None and \
                file_sha256(root / Path(evaluated).name) == kept.evaluation.get("playbook_sha256"):
            other = _task(kept.config)
            split = str(kept.evaluation["split"])
            found[split if other in (None, task) else f"{other} {split}"] = (folder, kept.evaluation)
    if record.evaluation is not None:
        found[str(record.evaluation["split"])] = (root, record.evaluation)
    return found


def compared(record: RunRecord) -> Compared:
    """``record`` as a row of the comparison."""
    summary, config = record.summary or {}, record.config or {}
    task = _task(config)
    evaluated = evaluations(record)
    scores = {split: float(evaluation["accuracy"]) for split, (_, evaluation) in evaluated.items()}
    intervals = {split: (float(interval["lower"]), float(interval["upper"])) for split, (_, evaluation)
                 in evaluated.items() if isinstance(interval := evaluation.get("interval"), Mapping)}
    if summary.get("final_val_accuracy") is not None:
        val = f'{config.get("task", {}).get("val_split", "validation")} (validation)'
        accuracy, answered = float(summary["final_val_accuracy"]), summary.get("final_val_answered")
        scores = {val: accuracy, **scores}
        if isinstance(answered, int) and answered > 0:
            intervals[val] = clopper_pearson(accuracy * answered, answered, DEFAULT_LEVEL)
    if summary.get("failed"):
        ended = "failed"
    elif summary.get("interrupted"):
        ended = "interrupted"
    elif summary.get("stopped_by"):
        ended = f"stopped: {summary['stopped_by']}"
    else:
        ended = "done" if summary else ("evaluation" if record.evaluation else "unknown")
    method = summary.get("method") or (record.evaluation or {}).get("learner") or config.get("method", "?")
    key = {name: value for name, value in config.items() if name not in _NOT_THE_CONFIGURATION}
    return Compared(
        name=record.root, task=task or "?", method=f"{summary.get('learner', '')} {method}".strip(),
        seed=config.get("seed"),
        scores=scores, intervals=intervals, rollouts=summary.get("rollouts"), tokens=summary.get("tokens"),
        explored=summary.get("candidates_explored"), accepted=summary.get("candidates_accepted"),
        tokens_per_improvement=summary.get("tokens_per_improvement"),
        dollars=money(summary["dollars"]) if "dollars" in summary else "",
        dollars_per_improvement=money(summary["dollars_per_improvement"])
        if "dollars_per_improvement" in summary and summary.get("candidates_accepted") else "",
        sim_seconds=summary.get("train_sim_seconds"), wall_seconds=summary.get("train_wall_seconds"), ended=ended,
        configuration=msgspec.json.encode(key, order="deterministic").decode())


def _score(row: Compared, split: str) -> str:
    """``row``'s accuracy on ``split`` with its interval, ``50.0% [6.8, 93.2]`` (empty: not scored)."""
    if split not in row.scores:
        return ""
    shown = f"{100 * row.scores[split]:.1f}%"
    if split in row.intervals:
        lower, upper = row.intervals[split]
        shown += f" [{100 * lower:.1f}, {100 * upper:.1f}]"
    return shown


def _number(value: float | int | None, form: str) -> str:
    return "" if value is None else format(value, form)


def compare_lines(runs: Sequence[str]) -> list[str]:
    """The Markdown comparison of the run directories ``runs`` (module docstring);
    :class:`~combee_fast.errors.ConfigError` naming the first that is not a run."""
    rows = [compared(read_run(run)) for run in runs]
    splits = list(dict.fromkeys(split for row in rows for split in row.scores))
    header = ["run", "task", "method", "seed", *splits, "rollouts", "tokens", "explored", "accepted",
              "tokens/improvement", "dollars", "dollars/improvement", "critical path s", "wall s", "ended"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row.name, row.task, row.method, _number(row.seed, "d"),
                 *(_score(row, split) for split in splits),
                 _number(row.rollouts, ","), _number(row.tokens, ","), _number(row.explored, ","),
                 _number(row.accepted, ","), _number(row.tokens_per_improvement, ",.0f"), row.dollars,
                 row.dollars_per_improvement, _number(row.sim_seconds, ",.1f"),
                 _number(row.wall_seconds, ",.1f"), row.ended]
        lines.append("| " + " | ".join(cells) + " |")
    groups: dict[str, list[Compared]] = {}
    for row in rows:
        groups.setdefault(row.configuration, []).append(row)
    seeded = [group for group in groups.values() if len({row.seed for row in group}) > 1]
    if seeded:
        lines += ["", "Across seeds (mean ± standard deviation):", "",
                  "| task | method | runs | seeds | " + " | ".join(splits) + " | critical path s |",
                  "|" + "---|" * (5 + len(splits))]
        for group in seeded:
            cells = [group[0].task, group[0].method, str(len(group)), ", ".join(str(row.seed) for row in group)]
            for split in splits:
                values = [row.scores[split] for row in group if split in row.scores]
                cells.append(_spread([100 * v for v in values], "%"))
            cells.append(_spread([row.sim_seconds for row in group if row.sim_seconds is not None], " s"))
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def _spread(values: Sequence[float], unit: str) -> str:
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:,.1f}{unit}"
    return f"{statistics.mean(values):,.1f} ± {statistics.stdev(values):,.1f}{unit} (n={len(values)})"
