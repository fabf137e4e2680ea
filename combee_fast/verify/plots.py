"""PNG figures of the reports (matplotlib, Agg backend: no display needed).

* :func:`convergence_plot`: the serial baseline's held-out score against rollouts, with each
  checkpoint's interval, the empty playbook's score and the plateau window.
* :func:`cells_plot`: speedup (against the claim) and test accuracy (against the baseline's) per
  cell, with intervals.
* :func:`accuracy_time_plot`: test accuracy against simulated training time, one marker per
  method and cell, as the paper's figures show accuracy against time.
* :func:`time_curves_plot`: accuracy through a run against simulated training time, one line per
  method (its validations), each ending in a star (its final artifact's held-out score).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import msgspec  # noqa: E402

from combee_fast.native.proportion import ScoreInterval  # noqa: E402
from combee_fast.verify.cells import CellRun  # noqa: E402
from combee_fast.verify.verdict import Verdict  # noqa: E402


COLOURS = ("tab:blue", "tab:green", "tab:red", "tab:purple", "tab:orange")
"""One per method, in the order the methods are given (the time plots)."""


class TimeCurve(msgspec.Struct, frozen=True):
    """One method's line of :func:`time_curves_plot`: ``points``, ``(simulated seconds,
    accuracy in [0, 1])`` in time order, drawn as a line; ``end``, one more such point drawn as a
    star (None: no star)."""

    label: str
    points: tuple[tuple[float, float], ...]
    end: tuple[float, float] | None = None


def _save(figure: plt.Figure, path: str | Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return Path(path)


def convergence_plot(path: str | Path, rollouts: Sequence[int], scores: Sequence[ScoreInterval],
                     empty: ScoreInterval, *, window_start: int | None, title: str) -> Path:
    """Held-out score (with intervals) against rollouts; the empty playbook as a band."""
    figure, axes = plt.subplots(figsize=(7, 4))
    means = [100 * s.mean for s in scores]
    axes.fill_between(rollouts, [100 * s.lower for s in scores], [100 * s.upper for s in scores],
                      alpha=0.25, color="tab:blue", label="95% interval")
    axes.plot(rollouts, means, "o-", color="tab:blue", label="serial baseline, test split")
    axes.axhspan(100 * empty.lower, 100 * empty.upper, color="tab:gray", alpha=0.2)
    axes.axhline(100 * empty.mean, color="tab:gray", linestyle="--", label="empty playbook")
    if window_start is not None:
        axes.axvspan(window_start, rollouts[-1], color="tab:green", alpha=0.08, label="plateau window")
    axes.set_xlabel("rollouts (generator calls of the serial baseline)")
    axes.set_ylabel("held-out accuracy (%)")
    axes.set_title(title)
    axes.legend(loc="lower right", fontsize=8)
    axes.grid(alpha=0.3)
    return _save(figure, path)


def cells_plot(path: str | Path, verdicts: Sequence[tuple[str, Verdict]]) -> Path:
    """Three panels per cell: speedup (against the claimed speedup), test accuracy with its
    interval (beside the serial baseline's), and the paired difference to the baseline with its
    interval (against minus the margin). One colour per configuration."""
    figure, (speed, accuracy, difference) = plt.subplots(1, 3, figsize=(15, 4.6))
    colours = ("tab:green", "tab:red", "tab:purple", "tab:orange")
    slots = len(verdicts) + 1
    width = 0.8 / slots
    names = [cell.name for cell in verdicts[0][1].cells]
    claim = verdicts[0][1].claim

    def errors(intervals: Sequence[tuple[float, float, float]]) -> list[list[float]]:
        return [[100 * (m - lo) for m, lo, _ in intervals], [100 * (hi - m) for m, _, hi in intervals]]

    for index, (label, verdict) in enumerate(verdicts):
        colour = colours[index % len(colours)]
        xs = [i + index * width for i in range(len(verdict.cells))]
        speed.bar(xs, [cell.speedup for cell in verdict.cells], width, color=colour,
                  label=f"{label} ({verdict.word})")
        spans = [(c.accuracy.mean, c.accuracy.lower, c.accuracy.upper) for c in verdict.cells]
        accuracy.errorbar(xs, [100 * m for m, _, _ in spans], yerr=errors(spans), fmt="o", color=colour, capsize=3,
                          label=label)
        diffs = [(c.difference.difference, c.difference.lower, c.difference.upper) for c in verdict.cells]
        difference.errorbar(xs, [100 * m for m, _, _ in diffs], yerr=errors(diffs), fmt="o", color=colour,
                            capsize=3, label=f"{label} - baseline")
    base = verdicts[0][1].cells
    xs = [i + len(verdicts) * width for i in range(len(base))]
    spans = [(c.baseline_accuracy.mean, c.baseline_accuracy.lower, c.baseline_accuracy.upper) for c in base]
    accuracy.errorbar(xs, [100 * m for m, _, _ in spans], yerr=errors(spans), fmt="s", color="tab:blue", capsize=3,
                      label="serial baseline")
    speed.axhline(claim.speedup, color="black", linestyle="--", label=f"claimed {claim.speedup:g}x")
    difference.axhline(0.0, color="tab:gray", linewidth=0.8)
    difference.axhline(-100 * claim.margin, color="black", linestyle="--", label=f"-margin ({100 * claim.margin:g} pts)")
    for axes in (speed, accuracy, difference):
        axes.set_xticks([i + width * (slots - 1) / 2 for i in range(len(names))], names, rotation=30, ha="right",
                        fontsize=8)
        axes.grid(alpha=0.3, axis="y")
        axes.legend(fontsize=7, loc="lower left", framealpha=0.9)
    speed.set_ylabel("speedup over serial baseline (x, sim. time)")
    speed.set_title("speedup per cell")
    accuracy.set_ylabel("test accuracy (%), 95% interval")
    accuracy.set_title("held-out accuracy per cell")
    difference.set_ylabel("minus baseline (points), 95% paired interval")
    difference.set_title("paired difference to the serial baseline")
    return _save(figure, path)


def accuracy_time_plot(path: str | Path, methods: Sequence[tuple[str, Sequence[CellRun]]]) -> Path:
    """Test accuracy against simulated training time (log scale), one marker per cell, a
    colour per method and a marker shape per hardware class."""
    return time_points_plot(path, [(label, [(c.sim_seconds, c.test_accuracy, c.hardware) for c in cells])
                                   for label, cells in methods], ylabel="test accuracy (%)")


def time_points_plot(path: str | Path, methods: Sequence[tuple[str, Sequence[tuple[float, float, str]]]], *,
                     ylabel: str) -> Path:
    """Accuracy against simulated training time (log scale): per method, points
    ``(simulated seconds, accuracy in [0, 1], group)``; a colour per method, a shape per group."""
    figure, axes = plt.subplots(figsize=(7, 4.2))
    shapes = ("o", "s", "^", "D", "v")
    groups = sorted({group for _, points in methods for _, _, group in points})
    for index, (label, points) in enumerate(methods):
        for seconds, accuracy, group in points:
            axes.scatter(seconds / 3600, 100 * accuracy, color=COLOURS[index % len(COLOURS)],
                         marker=shapes[groups.index(group) % len(shapes)], s=45, alpha=0.75,
                         label=f"{label} ({group})" if len(groups) > 1 else label)
    handles, labels = axes.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    axes.legend(unique.values(), unique.keys(), fontsize=7)
    return _save_time_axes(figure, axes, path, ylabel)


def time_curves_plot(path: str | Path, curves: Sequence[TimeCurve], *, ylabel: str, end_label: str) -> Path:
    """Accuracy against simulated training time (hours, log scale): each curve's points as a line
    in a colour of its own, its ``end`` as a star of that colour (``end_label`` says what the
    stars are, in the legend)."""
    figure, axes = plt.subplots(figsize=(7, 4.2))
    for index, curve in enumerate(curves):
        colour = COLOURS[index % len(COLOURS)]
        axes.plot([s / 3600 for s, _ in curve.points], [100 * a for _, a in curve.points], "o-", color=colour,
                  markersize=4, label=curve.label)
        if curve.end is not None:
            axes.scatter(curve.end[0] / 3600, 100 * curve.end[1], color=colour, marker="*", s=140, zorder=3,
                         edgecolors="black", linewidths=0.5)
    axes.scatter([], [], color="white", marker="*", s=140, edgecolors="black", linewidths=0.5, label=end_label)
    axes.legend(fontsize=7)
    return _save_time_axes(figure, axes, path, ylabel)


def _save_time_axes(figure: plt.Figure, axes: plt.Axes, path: str | Path, ylabel: str) -> Path:
    """Label ``axes`` as accuracy (``ylabel``) against simulated training hours on a log scale,
    then save ``figure`` to ``path``."""
    axes.set_xscale("log")
    axes.set_xlabel("simulated training time (hours, log scale)")
    axes.set_ylabel(ylabel)
    axes.set_title("accuracy vs simulated time per method")
    axes.grid(alpha=0.3, which="both")
    return _save(figure, path)
