"""The verdict of a verification: per cell, the speedup over the serial baseline, held-out
accuracy with its interval and the paired difference to the baseline with its interval.

A cell holds when (1) its speedup (baseline training seconds / the configuration's) is at least
the card's claimed speedup, and (2) its quality difference is not significantly negative beyond
the card's margin: the upper end of the paired bootstrap interval of (configuration - baseline)
test accuracy is at least ``-margin``. The verdict is PASS only when every cell holds; FAIL names
the cells that broke and why. Pure statistics: nothing here runs a model.
"""

from __future__ import annotations

import time

import msgspec
import numpy as np

from combee_fast.native.bootstrap import DEFAULT_RESAMPLES, PairedDifference, paired_bootstrap
from combee_fast.native.proportion import ScoreInterval, score_interval
from combee_fast.verify.card import Claim
from combee_fast.verify.cells import CellRun


class CellVerdict(msgspec.Struct, frozen=True, kw_only=True):
    """One (hardware class, seed) cell judged against the claim."""

    hardware: str
    seed: int
    speedup: float
    accuracy: ScoreInterval
    baseline_accuracy: ScoreInterval
    difference: PairedDifference
    speedup_holds: bool
    quality_holds: bool

    @property
    def holds(self) -> bool:
        return self.speedup_holds and self.quality_holds

    @property
    def name(self) -> str:
        return f"{self.hardware}/seed{self.seed}"

    def reasons(self, claim: Claim) -> list[str]:
        """Why the cell broke (empty when it holds)."""
        reasons = []
        if not self.speedup_holds:
            reasons.append(f"speedup {self.speedup:.2f}x < claimed {claim.speedup:g}x")
        if not self.quality_holds:
            d = self.difference
            reasons.append(f"test accuracy {100 * d.difference:+.1f} points vs baseline, interval "
                           f"[{100 * d.lower:+.1f}, {100 * d.upper:+.1f}] entirely below -{100 * claim.margin:g}")
        return reasons


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """Every cell's verdict, the overall one, and how long the bootstrap statistics took."""

    claim: Claim
    cells: tuple[CellVerdict, ...]
    bootstrap_seconds: float

    @property
    def passed(self) -> bool:
        return all(cell.holds for cell in self.cells)

    @property
    def word(self) -> str:
        return "PASS" if self.passed else "FAIL"

    @property
    def broken(self) -> list[str]:
        """``hardware/seedN: reason; reason`` for every cell that broke."""
        return [f"{cell.name}: {'; '.join(cell.reasons(self.claim))}" for cell in self.cells if not cell.holds]

    @property
    def min_speedup(self) -> float:
        return min(cell.speedup for cell in self.cells)

    @property
    def max_quality_drop(self) -> float:
        """The largest drop of test accuracy below the baseline over the cells, in points (>= 0)."""
        return max(0.0, max(-100 * cell.difference.difference for cell in self.cells))


def judge_cell(run: CellRun, baseline: CellRun, claim: Claim, *, resamples: int = DEFAULT_RESAMPLES,
               seed: int = 0) -> CellVerdict:
    """The verdict of ``run`` against ``baseline`` in one cell; both scored on the same test rows."""
    if (run.test_sha256, len(run.test_scores)) != (baseline.test_sha256, len(baseline.test_scores)):
        raise ValueError(f"cell {run.hardware}/seed{run.seed}: the run and the baseline were scored on different "
                         f"test splits ({run.test_sha256[:12]} vs {baseline.test_sha256[:12]})")
    ours, theirs = np.asarray(run.test_scores), np.asarray(baseline.test_scores)
    difference = paired_bootstrap(ours, theirs, resamples=resamples, seed=seed)
    speedup = baseline.sim_seconds / run.sim_seconds if run.sim_seconds > 0 else float("inf")
    return CellVerdict(
        hardware=run.hardware, seed=run.seed, speedup=speedup,
        accuracy=score_interval(ours), baseline_accuracy=score_interval(theirs),
        difference=difference, speedup_holds=speedup >= claim.speedup,
        quality_holds=difference.upper >= -claim.margin,
    )


def judge(runs: list[tuple[CellRun, CellRun]], claim: Claim, *, resamples: int = DEFAULT_RESAMPLES) -> Verdict:
    """The verdict over ``(run, baseline)`` pairs, one per cell; times the statistics."""
    started = time.perf_counter()
    cells = tuple(judge_cell(run, baseline, claim, resamples=resamples, seed=index)
                  for index, (run, baseline) in enumerate(runs))
    return Verdict(claim=claim, cells=cells, bootstrap_seconds=time.perf_counter() - started)
