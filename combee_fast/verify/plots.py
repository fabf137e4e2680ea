"""PNG figures of the reports (matplotlib, Agg backend: no display needed).

* :func:`convergence_plot`: the serial baseline's held-out score against rollouts, with each
  checkpoint's interval, the empty playbook's score and the plateau window.
* :func:`cells_plot`: speedup (against the claim) and test accuracy (against the baseline's) per
  cell, with intervals.
* :func:`accuracy_time_plot`: test accuracy against simulated training time, one marker per
  method and cell, as the paper's figures show accuracy against time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from combee_fast.native.bootstrap import MeanInterval  # noqa: E402
from combee_fast.verify.cells import CellRun  # noqa: E402
from combee_fast.verify.verdict import Verdict  # noqa: E402


def _save(figure: plt.Figure, path: str | Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return Path(path)


def convergence_plot(path: str | Path, rollouts: Sequence[int], scores: Sequence[MeanInterval],
                     empty: MeanInterval, *, window_start: int | None, title: str) -> Path:
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
    """Left: speedup per cell with the claimed speedup; right: test accuracy per cell with
    intervals, the configuration's beside the baseline's. One colour per configuration."""
    figure, (speed, accuracy) = plt.subplots(1, 2, figsize=(11, 4.2))
    colours = ("tab:green", "tab:red", "tab:purple", "tab:orange")
    width = 0.8 / (len(verdicts) + 1)
    names = [cell.name for cell in verdicts[0][1].cells]
    for index, (label, verdict) in enumerate(verdicts):
        colour = colours[index % len(colours)]
        xs = [i + index * width for i in range(len(verdict.cells))]
        speed.bar(xs, [cell.speedup for cell in verdict.cells], width, color=colour,
                  label=f"{label} ({verdict.word})")
        means = [100 * cell.accuracy.mean for cell in verdict.cells]
        errors = [[100 * (c.accuracy.mean - c.accuracy.lower) for c in verdict.cells],
                  [100 * (c.accuracy.upper - c.accuracy.mean) for c in verdict.cells]]
        accuracy.errorbar(xs, means, yerr=errors, fmt="o", color=colour, capsize=3, label=label)
    claim = verdicts[0][1].claim
    speed.axhline(claim.speedup, color="black", linestyle="--", label=f"claimed {claim.speedup:g}x")
    base = verdicts[0][1].cells
    xs = [i + len(verdicts) * width for i in range(len(base))]
    accuracy.errorbar(xs, [100 * c.baseline_accuracy.mean for c in base],
                      yerr=[[100 * (c.baseline_accuracy.mean - c.baseline_accuracy.lower) for c in base],
                            [100 * (c.baseline_accuracy.upper - c.baseline_accuracy.mean) for c in base]],
                      fmt="s", color="tab:blue", capsize=3, label="serial baseline")
    for axes in (speed, accuracy):
        axes.set_xticks([i + width * len(verdicts) / 2 for i in range(len(names))], names, rotation=30, ha="right",
                        fontsize=8)
        axes.grid(alpha=0.3, axis="y")
        axes.legend(fontsize=8)
    speed.set_ylabel("speedup over the serial baseline (x, simulated time)")
    speed.set_title("speedup per cell")
    accuracy.set_ylabel("test accuracy (%), 95% bootstrap interval")
    accuracy.set_title("held-out accuracy per cell")
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
    colours = ("tab:blue", "tab:green", "tab:red", "tab:purple", "tab:orange")
    shapes = ("o", "s", "^", "D", "v")
    groups = sorted({group for _, points in methods for _, _, group in points})
    for index, (label, points) in enumerate(methods):
        for seconds, accuracy, group in points:
            axes.scatter(seconds / 3600, 100 * accuracy, color=colours[index % len(colours)],
                         marker=shapes[groups.index(group) % len(shapes)], s=45, alpha=0.75,
                         label=f"{label} ({group})" if len(groups) > 1 else label)
    handles, labels = axes.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    axes.legend(unique.values(), unique.keys(), fontsize=7)
    axes.set_xscale("log")
    axes.set_xlabel("simulated training time (hours, log scale)")
    axes.set_ylabel(ylabel)
    axes.set_title("accuracy vs simulated time per method")
    axes.grid(alpha=0.3, which="both")
    return _save(figure, path)
