"""``diagnose``: should this serial method be parallelised at all? A curve and two tests.

The card's serial baseline runs once (one hardware class, one seed), budgeted by the card
(:class:`~combee_fast.verify.budget.BudgetGuard`), keeping every playbook version. Then, report
only, the playbook at ``checkpoints`` evenly spaced steps, and the empty playbook, are scored per
example on the card's test split: a curve of held-out score against rollouts. Two per-example
paired bootstrap tests decide (numbers, not eyeballing):

* **plateau**: the last checkpoint against the checkpoint at the start of the plateau window (the
  last ``plateau_window`` of the curve's rollouts). Plateau reached when the upper end of the
  interval of (last - window start) is at most the card's margin (over the window the curve
  provably gained no more than the margin) *and* the baseline saw its whole train split at least
  once (a run the budget stopped earlier has not met data that may still teach it: a short
  curve with few changed test answers can look flat by chance). Otherwise it may still be
  rising: "add serial rollouts first".
* **above empty**: the last checkpoint against the empty playbook. Above when the lower end of
  the interval of (last - empty) is above zero. On a plateau that is not above it: "the method is
  the problem: change it before scaling" (before a plateau the test is reported, not decisive).

GO for parallelisation only when both hold. The diagnosis also measures what the card leaves
"unknown": the empty playbook's test score, the converged score (the last checkpoint's) and the
rollouts to converge (the first checkpoint within the margin of it); and the cost of reaching the
target score (the card's, else the converged score minus the margin): rollouts, tokens and
GPU-seconds up to the first checkpoint at or above it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import numpy as np

from combee_fast.config import SimConfig, VerifyConfig
from combee_fast.native.bootstrap import DEFAULT_RESAMPLES, PairedDifference, paired_bootstrap
from combee_fast.native.proportion import ScoreInterval, score_interval
from combee_fast.record.rundir import RunDir
from combee_fast.record.usage import append_usage, usage_entry
from combee_fast.run.events import Events
from combee_fast.session import open_session
from combee_fast.tasks.heldout import check_use
from combee_fast.verify.budget import BudgetGuard
from combee_fast.verify.card import Card, HardwareClass
from combee_fast.verify.cells import baseline_config, card_usage, pools_of, served_by

ADD_ROLLOUTS = "add serial rollouts first"
CHANGE_METHOD = "the method is the problem: change it before scaling"


class Checkpoint(msgspec.Struct, frozen=True):
    """The artifact after ``step`` (``rollouts`` so far, version ``version`` of size ``bullets``)
    scored on the test split."""

    step: int
    rollouts: int
    tokens: int  # cumulative, up to and including the step
    gpu_seconds: float | None  # cumulative; None when unknown
    version: int
    bullets: int
    scores: tuple[float, ...]
    score: ScoreInterval


class Diagnosis(msgspec.Struct, frozen=True, kw_only=True):
    """The curve, the two tests and the decision."""

    card: Card
    hardware: str
    seed: int
    world: str
    empty: Checkpoint
    curve: tuple[Checkpoint, ...]
    window_start: Checkpoint
    plateau: PairedDifference  # last - window start
    lift: PairedDifference  # last - empty
    margin: float
    stopped_by: str | None
    rollouts: int
    samples: int  # train examples the baseline learned from (every pass counted)
    train_rows: int  # rows of the train split
    sim_seconds: float
    models: dict[str, str]
    pools: dict[str, str]
    use_ground_truth: bool

    @property
    def one_pass(self) -> bool:
        """The baseline saw every train example at least once."""
        return self.samples >= self.train_rows

    @property
    def plateau_reached(self) -> bool:
        return self.one_pass and self.plateau.upper <= self.margin

    @property
    def above_empty(self) -> bool:
        return self.lift.lower > 0.0

    @property
    def go(self) -> bool:
        return self.plateau_reached and self.above_empty

    @property
    def decision(self) -> str:
        return "GO" if self.go else "NO-GO"

    @property
    def converged_score(self) -> float:
        return self.curve[-1].score.mean

    @property
    def rollouts_to_converge(self) -> int:
        """Rollouts of the first checkpoint scoring within the margin of the last one."""
        last = self.converged_score
        return next(c.rollouts for c in self.curve if c.score.mean >= last - self.margin)

    @property
    def target_score(self) -> float:
        """The card's target score, else the converged score minus the margin."""
        target = self.card.claim.target_score
        return self.converged_score - self.margin if isinstance(target, str) else target

    @property
    def to_target(self) -> Checkpoint | None:
        """The first checkpoint at or above :attr:`target_score` (None: the curve never got there)."""
        return next((c for c in self.curve if c.score.mean >= self.target_score - 1e-12), None)

    def reasons(self) -> list[str]:
        """One sentence per test, with its numbers; NO-GO reasons first."""
        p, d = self.plateau, self.lift
        plateau = (f"the last {self.curve[-1].rollouts - self.window_start.rollouts} rollouts "
                   f"({self.window_start.rollouts} -> {self.curve[-1].rollouts}) changed the test score by "
                   f"{100 * p.difference:+.1f} points, 95% interval [{100 * p.lower:+.1f}, {100 * p.upper:+.1f}]")
        lift = (f"the last checkpoint scores {100 * d.difference:+.1f} points over the empty playbook, 95% interval "
                f"[{100 * d.lower:+.1f}, {100 * d.upper:+.1f}]")
        stopped = f" (the run stopped: {self.stopped_by})" if self.stopped_by else ""
        failing, passing = [], []
        if self.plateau_reached:
            passing.append(f"plateau reached: {plateau}, at most the margin of {100 * self.margin:g} points")
        elif not self.one_pass:
            failing.append(f"no plateau yet, {ADD_ROLLOUTS}: the baseline learned from {self.samples} of its "
                           f"{self.train_rows} train examples{stopped}, so its curve cannot have levelled off on "
                           f"its data ({plateau})")
        else:
            failing.append(f"still rising, {ADD_ROLLOUTS}: {plateau}; a plateau must gain at most "
                           f"{100 * self.margin:g} points{stopped}")
        if self.above_empty:
            passing.append(f"above the empty playbook: {lift}")
        elif self.plateau_reached:
            failing.append(f"not above the empty playbook, {CHANGE_METHOD}: {lift}, not above zero")
        else:
            passing.append(f"not yet above the empty playbook ({lift}); undecided before a plateau")
        return failing + passing


def checkpoint_steps(rollouts: list[int], count: int) -> list[int]:
    """Indices of ``count`` steps evenly spaced by cumulative ``rollouts`` (always the last one)."""
    if not rollouts:
        return []
    total = rollouts[-1]
    steps = sorted({int(np.searchsorted(rollouts, total * (k + 1) / count)) for k in range(count)})
    return [min(step, len(rollouts) - 1) for step in steps]


async def diagnose(card: Card, card_path: str | Path, out: str | Path, *, hardware: HardwareClass | None = None,
                   seed: int = 0, settings: VerifyConfig = VerifyConfig(), world: str = SimConfig().world,
                   epochs: int | None = None, resamples: int = DEFAULT_RESAMPLES,
                   on_progress: Callable[[str], None] | None = None) -> Diagnosis:
    """Run the serial baseline of ``card`` into ``out/baseline`` and diagnose it (module docstring).

    ``hardware``: the class to run on (default: the card's first). ``epochs``: passes over the
    train split (default: the config default); the card's budget may stop the run sooner.
    ``on_progress``: told one line per scored checkpoint; with it the baseline's steps are shown
    as ``learn`` shows them (:meth:`~combee_fast.session.Session.progress`, on stderr).
    """
    hardware = hardware or card.hardware[0]
    config = baseline_config(card, hardware, seed, time_scale=settings.serial_time_scale, world=world)
    if epochs is not None:
        config = msgspec.structs.replace(config, train=msgspec.structs.replace(config.train, epochs=epochs))
    name = f"diagnose {hardware.name} seed {seed}"
    usage = card_usage(card_path, card, run=name, command="diagnose")
    guard = BudgetGuard(card.budget)
    run_root = Path(out) / "baseline"
    test_name = card.split_of_role("test").name
    async with open_session(config) as session:
        role = check_use(session.task, test_name, "report", usage.roles)
        test = session.task.load(test_name)
        run_dir = RunDir(run_root, overwrite=True)
        try:
            events = Events(session.progress()) if on_progress is not None else None
            result = await session.train(run_dir=run_dir, usage=usage, gpus=hardware.gpu_count, stops=(guard,),
                                         events=events)
        finally:
            run_dir.close()
        kind = session.choice.kind
        ledger = list(result.ledger)
        cumulative = list(np.cumsum([row.rollouts for row in ledger]).astype(int))
        tokens = list(np.cumsum([sum(r.prompt_tokens.values()) + sum(r.completion_tokens.values())
                                 for r in ledger]).astype(int))
        gpu = None if any(r.gpu_seconds is None for r in ledger) else \
            list(np.cumsum([r.gpu_seconds for r in ledger]))

        async def score(step: int, version: int, size: int) -> Checkpoint:
            deployable = kind.load_version(run_root, version, config)
            scores = (await session.evaluate(deployable, test.examples)).scores
            spent = (0, 0, 0.0) if step < 0 else \
                (int(cumulative[step]), int(tokens[step]), None if gpu is None else float(gpu[step]))
            return Checkpoint(step, *spent, version, size, scores, score_interval(np.asarray(scores)))

        steps = checkpoint_steps(cumulative, settings.checkpoints)
        started = time.monotonic()

        async def scored(index: int, step: int, version: int, size: int) -> Checkpoint:
            checkpoint = await score(step, version, size)
            if on_progress is not None:
                on_progress(f"[diagnose] checkpoint {index} of {len(steps)} ({time.monotonic() - started:,.0f} s): "
                            f"{checkpoint.rollouts:,} rollouts, test {100 * checkpoint.score.mean:.1f}%")
            return checkpoint

        empty = await scored(0, -1, 0, 0)
        curve = [await scored(index, step, ledger[step].version, ledger[step].size)
                 for index, step in enumerate(steps, start=1)]
    append_usage(usage.record, [usage_entry(test.manifest, role=role, use="report", run=name, command="diagnose")])
    last = curve[-1]
    start_at = last.rollouts * (1.0 - settings.plateau_window)
    window_start = max((c for c in [empty, *curve] if c.rollouts <= start_at), key=lambda c: c.rollouts)
    return Diagnosis(
        card=card, hardware=hardware.name, seed=seed, world=world, empty=empty, curve=tuple(curve),
        window_start=window_start,
        plateau=paired_bootstrap(np.asarray(last.scores), np.asarray(window_start.scores), resamples=resamples),
        lift=paired_bootstrap(np.asarray(last.scores), np.asarray(empty.scores), resamples=resamples),
        margin=card.claim.margin, stopped_by=result.stopped_by,
        rollouts=result.rollouts, samples=result.samples, train_rows=len(session.train_split.examples),
        sim_seconds=result.train_sim_seconds, models=served_by(config), pools=pools_of(config),
        use_ground_truth=config.use_ground_truth,
    )
