"""Each command's one page, ``report.md`` (with its provenance), its PNG plots, and an index.

:func:`diagnose_report` writes the page of ``diagnose`` (ending in GO or NO-GO with reasons) and
``convergence.png``; :func:`demo_report` the demo's (its methods side by side, scored on the test
split), ``accuracy-time.png`` and its points (``accuracy-time.json``); :func:`verify_report` the
page of ``verify`` with the per-cell table, the verdict, the role separation and two plots
(``cells.png``, ``accuracy-time.png``); :func:`write_index` writes ``index.md`` linking every
``*.md`` report and ``*.png`` plot in the folder (and one level down: each run's own ``report.md``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import msgspec

from combee_fast.files import write_atomic
from combee_fast.native.proportion import ScoreInterval
from combee_fast.readout.report import provenance_lines
from combee_fast.record.provenance import Provenance
from combee_fast.run.train import CURVE_POINTS, TrainResult
from combee_fast.verify.cells import CellRun
from combee_fast.verify.diagnose import Diagnosis
from combee_fast.verify.plots import TimeCurve, accuracy_time_plot, cells_plot, convergence_plot, time_curves_plot
from combee_fast.verify.roles import role_separation
from combee_fast.verify.verification import Verification

INDEX = "index.md"
PAGE = "report.md"
CURVES = "accuracy-time.json"
"""The demo's plotted points (a list of :class:`~combee_fast.verify.plots.TimeCurve`), beside its figure."""


def _with_provenance(lines: list[str], record: Provenance | None) -> list[str]:
    return lines if record is None else [*lines, "", "## Provenance", "", *provenance_lines(record.ended_now())]


def _interval(value: float, lower: float, upper: float, signed: bool = False) -> str:
    sign = "+" if signed else ""
    return f"{100 * value:{sign}.1f} [{100 * lower:{sign}.1f}, {100 * upper:{sign}.1f}]"


def cost_lines(runs: Sequence[CellRun]) -> list[str]:
    """One Markdown table row per cell: rollouts, tokens, GPU-seconds and time."""
    lines = ["| cell | method | rollouts | tokens | GPU-s | sim s | wall s |", "|---|---|---:|---:|---:|---:|---:|"]
    for run in runs:
        gpu = "unknown" if run.gpu_seconds is None else f"{run.gpu_seconds:,.0f}"
        stopped = f"; stopped: {run.stopped_by}" if run.stopped_by else ""
        lines.append(f"| {run.hardware}/seed{run.seed} | {run.method} (batch {run.batch_size or 'auto'}{stopped}) | "
                     f"{run.rollouts:,} | {run.tokens:,} | {gpu} | {run.sim_seconds:,.0f} | {run.wall_seconds:.1f} |")
    return lines


def plan_lines(runs: Sequence[CellRun]) -> list[str]:
    """One line per cell: the batch size of each of its steps (runs of one size as ``size x n``)."""
    return [f"- {run.hardware}/seed{run.seed}: {_runs_of(run.plan) or 'no steps'}" for run in runs]


def _runs_of(sizes: Sequence[int]) -> str:
    parts: list[str] = []
    for size, group in itertools.groupby(sizes):
        n = len(list(group))
        parts.append(f"{size} x {n}" if n > 1 else str(size))
    return ", ".join(parts)


def verification_lines(result: Verification) -> list[str]:
    """The Markdown of one verification: claim, cells, verdict, cost, roles."""
    verdict, claim = result.verdict, result.card.claim
    lines = [
        f"## {result.label}: {verdict.word}",
        "",
        f"Claim: at least {claim.speedup:g}x faster than the serial baseline "
        f"({result.card.serial_baseline.method}) in every cell, losing no more than {100 * claim.margin:g} points "
        f"of test accuracy (upper end of the paired 95% interval >= -{100 * claim.margin:g}).",
        "",
        "| cell | speedup (simulated) | speedup (wall clock) | test acc. % [95% CI] | baseline % [95% CI] | "
        "difference, points [95% CI] | holds |",
        "|---|---:|---:|---|---|---|---|",
    ]
    for cell, run, base in zip(verdict.cells, result.runs, result.baselines):
        a, b, d = cell.accuracy, cell.baseline_accuracy, cell.difference
        wall = f"{base.wall_seconds / run.wall_seconds:.2f}x" if run.wall_seconds > 0 else "n/a"
        lines.append(f"| {cell.name} | {cell.speedup:.2f}x | {wall} | {_interval(a.mean, a.lower, a.upper)} | "
                     f"{_interval(b.mean, b.lower, b.upper)} | {_interval(d.difference, d.lower, d.upper, True)} | "
                     f"{'yes' if cell.holds else 'NO'} |")
    lines += ["", "The simulated speedup compares training critical paths in the endpoint's seconds (the claim is "
              "judged on it); the wall-clock speedup compares real training seconds. On a simulated hardware class "
              "each side's real time is its simulated time times its time scale (the serial baseline runs at "
              "`--serial-time-scale`), so there only the simulated speedup compares; on a class of real endpoints "
              "the wall clock is what a user waits."]
    lines += ["", f"Verdict **{verdict.word}**: min speedup {verdict.min_speedup:.2f}x, max quality drop "
              f"{verdict.max_quality_drop:.1f} points; bootstrap statistics took {1000 * verdict.bootstrap_seconds:.0f} ms "
              f"({verdict.cells[0].difference.resamples} resamples per paired interval; each accuracy's interval is the "
              "exact Clopper-Pearson one)."]
    if not verdict.passed:
        lines += ["", "Broken cells:", *(f"- {line}" for line in verdict.broken)]
    lines += ["", f"Serial baseline cells from the cache: {result.cached_baselines} of {len(result.baselines)}.",
              "", "Cost per cell (this configuration, then the serial baseline):", "",
              *cost_lines([*result.runs, *result.baselines]),
              "", "Batch plan per cell of this configuration (the batch size of each step; each cell's run is "
              f"kept in `runs/{result.label}-<hardware>-seed<k>/`; under `--batch-size auto`, `combee learn "
              "--plan-from runs/<cell>/controller.jsonl` repeats its plan):", "",
              *plan_lines(result.runs)]
    first = result.runs[0]
    roles, warnings = role_separation(first.models, first.pools, use_ground_truth=first.use_ground_truth,
                                      scorer=result.card.eval_set.scoring)
    lines += ["", "Role separation:", "", *roles]
    lines += ["", *(f"**Warning:** {w}" for w in warnings)] if warnings else []
    return lines


def verify_report(folder: str | Path, results: Sequence[Verification], *, title: str,
                  record: Provenance | None = None) -> Path:
    """Write the verify report of ``results`` (one or more configurations against one card) and its
    plots into ``folder``; returns the Markdown file."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    cells_png = cells_plot(root / "cells.png", [(r.label, r.verdict) for r in results])
    methods = [("serial baseline", results[0].baselines), *((r.label, r.runs) for r in results)]
    time_png = accuracy_time_plot(root / "accuracy-time.png", methods)
    card = results[0].card
    lines = [f"# {title}", "", f"Card `{card.name}`: task {card.task.name}, test split "
             f"`{card.split_of_role('test').name}` (report only), hardware classes "
             f"{', '.join(h.name for h in card.hardware)}, seeds {sorted({r.seed for r in results[0].runs})}.",
             "", f"![speedup and accuracy per cell]({cells_png.name})", "",
             f"![accuracy vs simulated time per method]({time_png.name})", ""]
    for result in results:
        lines += [*verification_lines(result), ""]
    path = root / PAGE
    write_atomic(path, "\n".join(_with_provenance(lines, record)).encode())
    write_index(root)
    return path


def diagnose_report(folder: str | Path, diagnosis: Diagnosis, *, record: Provenance | None = None) -> Path:
    """Write the page and ``convergence.png`` into ``folder`` (and the index); returns the Markdown."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    d, card = diagnosis, diagnosis.card
    points = [d.empty, *d.curve]
    png = convergence_plot(root / "convergence.png", [c.rollouts for c in points], [c.score for c in points],
                           d.empty.score, window_start=d.window_start.rollouts,
                           title=f"{card.serial_baseline.method} on {card.task.name} ({d.hardware}, seed {d.seed}"
                                 f"{'' if d.world == 'default' else ', world ' + d.world})")
    lines = [
        f"# diagnose {card.name}: {d.decision}",
        "",
        f"Serial baseline {card.serial_baseline.method} ({card.serial_baseline.version}) on hardware class "
        f"{d.hardware}, seed {d.seed}, task world `{d.world}`: {d.rollouts:,} rollouts, {d.sim_seconds:,.0f} simulated s"
        + (f"; stopped: {d.stopped_by}." if d.stopped_by else "."),
        f"Its playbook scored per example on the test split `{card.split_of_role('test').name}` "
        f"({len(d.empty.scores)} examples, report only) at {len(d.curve)} checkpoints.",
        "",
        f"![held-out score against rollouts]({png.name})",
        "",
        "| rollouts | playbook version | entries | test accuracy % [95% CI] |",
        "|---:|---:|---:|---|",
        *(f"| {c.rollouts:,} | {c.version} | {c.bullets} | {_interval(c.score.mean, c.score.lower, c.score.upper)} |"
          for c in points),
        "",
        f"Measured for the card: baseline test score (empty playbook) {d.empty.score.mean:.3f}; converged score "
        f"{d.converged_score:.3f}; rollouts to converge {d.rollouts_to_converge:,} (`card.diagnosed.toml` holds "
        "the card with these in place of its \"unknown\" values).",
        "",
        _target_line(d),
        "",
    ]
    roles, warnings = role_separation(d.models, d.pools, use_ground_truth=d.use_ground_truth, scorer=card.eval_set.scoring)
    lines += ["Role separation:", "", *roles, *(f"\n**Warning:** {w}" for w in warnings), ""]
    lines += [f"## {d.decision} for parallelisation", "", *(f"- {reason}" for reason in d.reasons())]
    path = root / PAGE
    write_atomic(path, "\n".join(_with_provenance(lines, record)).encode())
    write_index(root)
    return path


def _target_line(d: Diagnosis) -> str:
    reached = d.to_target
    if reached is None:
        return f"Cost to reach the target score {d.target_score:.3f}: not reached within this run."
    gpu = "unknown" if reached.gpu_seconds is None else f"{reached.gpu_seconds:,.0f}"
    return (f"Cost to reach the target score {d.target_score:.3f} (first checkpoint at or above it): "
            f"{reached.rollouts:,} rollouts, {reached.tokens:,} tokens, {gpu} GPU-seconds.")


def demo_curves(results: Sequence[tuple[str, int, TrainResult, ScoreInterval]]) -> list[TimeCurve]:
    """Per method, what the demo's figure draws: the accuracy of each of its validations (over
    the answered examples) against the simulated seconds its training had taken by then (its
    validations' own seconds are not training), and its final playbook's held-out score at the
    end of its training as the curve's ``end``. A run keeps its latest
    :data:`~combee_fast.config.HISTORY_KEPT` ledger rows, so a longer run's curve starts there."""
    return [TimeCurve(f"{method} (batch {batch})",
                      tuple((row.cumulative_sim_seconds, row.val_accuracy) for row in r.ledger
                            if row.val_accuracy is not None),
                      (r.train_sim_seconds, score.mean))
            for method, batch, r, score in results]


def demo_report(folder: str | Path, results: Sequence[tuple[str, int, TrainResult, ScoreInterval]], *, split: str,
                val_split: str, models: dict[str, str], pools: dict[str, str], use_ground_truth: bool, scorer: str,
                record: Provenance | None = None, paired: Sequence[str] = ()) -> Path:
    """Write the demo's page (methods side by side: time, speedup, accuracy on ``split`` with its
    95% interval, cost, role separation; ``paired``: the methods compared per row),
    ``accuracy-time.png`` (each method's accuracy on ``val_split``, what it validated on, through
    its run, ending in its ``split`` score: :func:`demo_curves`) with its points (:data:`CURVES`),
    ``prompt.txt`` (the last method's final playbook, rendered) and the index into ``folder``;
    returns the page."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    curves = demo_curves(results)
    write_atomic(root / CURVES, msgspec.json.encode(curves))
    png = time_curves_plot(root / "accuracy-time.png", curves, ylabel="accuracy (%)",
                           end_label=f"final playbook on {split}")
    baseline = results[0][2].train_sim_seconds
    lines = ["# combee demo: sequential ACE, naive batching and Combee on Formula", "",
             "Simulated endpoint (the task world: a model, not evidence about real LLMs), flat latency preset, one "
             f"seed; each method's final playbook is scored on the held-out `{split}` split (report only: no "
             "method learned from or selected on it).", "",
             f"![accuracy vs simulated time per method]({png.name})", "",
             f"Each line: a method's accuracy on `{val_split}` (what it validated on, each time it had "
             f"spent another 1/{CURVE_POINTS} of its training samples, the last at its end) against the simulated "
             f"seconds of training so far; the star at its end: its final playbook on `{split}`. The points: "
             f"`{CURVES}`.", "",
             f"| method | batch | sim time (h) | speedup | {split} accuracy % [95% CI] | entries | rollouts | tokens | "
             "GPU-s |", "|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    for method, batch, r, score in results:
        gpu = "unknown" if r.gpu_seconds is None else f"{r.gpu_seconds:,.0f}"
        lines.append(f"| {method} | {batch} | {r.train_sim_seconds / 3600:.2f} | "
                     f"{baseline / max(r.train_sim_seconds, 1e-9):.1f}x | "
                     f"{_interval(score.mean, score.lower, score.upper)} | {len(r.artifact)} | "
                     f"{r.rollouts:,} | {r.tokens:,} | {gpu} |")
    if paired:
        lines += ["", f"Paired on the `{split}` rows (each method's scores: `<method>/results.jsonl`; "
                  "`combee compare --paired` compares any two):", "", *paired]
    roles, warnings = role_separation(models, pools, use_ground_truth=use_ground_truth, scorer=scorer)
    lines += ["", "Role separation:", "", *roles, *(f"\n**Warning:** {w}" for w in warnings), "",
              "One seed shows one draw of the task world. For claims that survive (seeds x hardware classes, paired "
              "intervals), see `combee diagnose cards/formula.toml` and `combee verify cards/formula.toml --config X`.",
              "", f"`prompt.txt` holds the final playbook of {results[-1][0]} (batch {results[-1][1]}), rendered as "
              "the generator reads it."]
    page = root / PAGE
    write_atomic(root / "prompt.txt", (results[-1][2].final.render().rstrip("\n") + "\n").encode())
    write_atomic(page, "\n".join(_with_provenance(lines, record)).encode())
    write_index(root, title="combee demo")
    return page


def write_index(folder: str | Path, title: str = "Reports") -> Path:
    """``index.md`` in ``folder`` linking every Markdown report and PNG plot there (and one level down)."""
    root = Path(folder)
    reports = sorted(p for p in root.glob("*.md") if p.name != INDEX) + sorted(root.glob("*/*.md"))
    plots = sorted(root.glob("*.png")) + sorted(root.glob("*/*.png"))
    lines = [f"# {title}", "", "Reports:", "", *(f"- [{p.relative_to(root)}]({p.relative_to(root)})" for p in reports),
             "", "Plots:", "", *(f"- [{p.relative_to(root)}]({p.relative_to(root)})" for p in plots)]
    path = root / INDEX
    write_atomic(path, "\n".join(lines).encode())
    return path
