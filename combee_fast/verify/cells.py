"""One cell of a verification: a configuration trained under one seed on one hardware class of a
card, then scored per example on the card's test split (report only).

:func:`cell_config` turns a run configuration into the cell's (the card's task, train and
selection splits, the seed, the hardware class's simulator preset or endpoints);
:func:`baseline_config` builds the card's serial baseline for a cell; :func:`run_cell` trains
and scores one. Every split use is appended to the card's usage record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from combee_fast.config import SessionConfig, SimConfig, TaskConfig, TrainConfig
from combee_fast.learners import roles_of, serial_baseline
from combee_fast.record.rundir import RunDir
from combee_fast.record.usage import SplitUsage, append_usage, usage_entry, usage_path
from combee_fast.session import open_session
from combee_fast.tasks.heldout import check_use
from combee_fast.verify.budget import BudgetGuard
from combee_fast.verify.card import Card, HardwareClass


class CellRun(msgspec.Struct, frozen=True, kw_only=True):
    """What one configuration did in one cell: its cost, its per-example test scores (in the
    test split's row order, so two runs of one card pair per example) and its batch plan (the
    batch size of each step, in order: what ``--plan-from`` repeats)."""

    method: str
    batch_size: int | None
    hardware: str
    seed: int
    sim_seconds: float  # the training's critical path (simulated seconds on the simulated endpoint)
    wall_seconds: float
    rollouts: int
    tokens: int
    calls: int
    gpu_seconds: float | None
    test_split: str
    test_sha256: str
    test_scores: tuple[float, ...]
    selection_accuracy: float | None
    models: dict[str, str]  # role -> "model @ endpoint" that served it
    pools: dict[str, str]  # role -> its pool (serve, propose, evaluate), in the learner's order
    use_ground_truth: bool
    stopped_by: str | None = None
    plan: tuple[int, ...] = ()

    @property
    def test_accuracy(self) -> float:
        return sum(self.test_scores) / len(self.test_scores) if self.test_scores else 0.0


def cell_config(card: Card, config: SessionConfig, hardware: HardwareClass, seed: int,
                *, time_scale: float | None = None) -> SessionConfig:
    """``config`` run as a cell of ``card``: the card's task, train and selection splits, ``seed``,
    and ``hardware``'s simulator preset (at ``time_scale``, default the config's) or endpoints."""
    task = TaskConfig(name=card.task.name, options=dict(card.task.options),
                      train_split=card.split_of_role("train").name,
                      val_split=card.split_of_role("selection").name)
    if hardware.sim_preset is not None:
        sim = msgspec.structs.replace(config.sim, preset=hardware.sim_preset,
                                      time_scale=config.sim.time_scale if time_scale is None else time_scale)
        return msgspec.structs.replace(config, seed=seed, task=task, sim=sim, endpoints={})
    return msgspec.structs.replace(config, seed=seed, task=task, endpoints=dict(hardware.endpoints or {}))


def baseline_config(card: Card, hardware: HardwareClass, seed: int, *, time_scale: float,
                    world: str = SimConfig().world, learner: str | None = None,
                    learners: dict[str, Any] | None = None) -> SessionConfig:
    """The card's serial baseline as a cell: its method (:func:`~combee_fast.learners.serial_baseline`:
    ``sequential`` on ``learner``, a learner's own serial name on that learner) at batch 1, every
    other setting the default but the learners' own settings (``learners``: the verified
    configuration's sections, so a GEPA baseline spends the same budget); ``time_scale`` for the
    simulated endpoint (one request in flight, so any scale gives the same simulated times);
    ``world`` the task-world variant."""
    method = card.serial_baseline.method
    kind = serial_baseline(method, learner).kind
    base = SessionConfig(learner=kind.key if method != "sequential" else learner, method=method,
                         train=TrainConfig(batch_size=1), learners=dict(learners or {}),
                         sim=SimConfig(world=world))
    return cell_config(card, base, hardware, seed, time_scale=time_scale)


def card_usage(card_path: str | Path, card: Card, *, run: str, command: str) -> SplitUsage:
    """The usage record of a run made by ``command`` under the card at ``card_path``."""
    return SplitUsage(record=str(usage_path(card_path)), roles=card.roles(),
                      card_text=Path(card_path).read_text(), run=run, command=command)


def served_by(config: SessionConfig) -> dict[str, str]:
    """Role -> "model @ endpoint" for every role of ``config`` (the simulated endpoint by preset)."""
    names = {}
    for role in roles_of(config):
        spec = config.endpoint_for(*role.lookup_keys)
        names[role.key] = f"{spec.model} @ {spec.url}" if spec.url else f"sim @ sim:{config.sim.preset}"
    return names


def pools_of(config: SessionConfig) -> dict[str, str]:
    """Role -> its pool for every role of ``config``, in its learner's order (what role separation reads)."""
    return {role.key: role.pool for role in roles_of(config)}


async def run_cell(card: Card, card_path: str | Path, config: SessionConfig, hardware: HardwareClass, *,
                   command: str, run_dir: str | Path | None = None) -> CellRun:
    """Train ``config`` (already a cell of ``card``, :func:`cell_config`), then score its best
    playbook (picked on the selection split) on the card's test split, per example.

    The run stops cleanly once a limit of the card's budget is spent (``stopped_by`` says which).
    The train and selection uses and the test report are appended to the card's usage record
    (the run named ``<command> <hardware> seed <seed>``). ``run_dir``: keep the run's files there.
    """
    name = f"{command} {config.method} {hardware.name} seed {config.seed}"
    usage = card_usage(card_path, card, run=name, command=command)
    test_name = card.split_of_role("test").name
    async with open_session(config) as session:
        role = check_use(session.task, test_name, "report", usage.roles)
        test = session.task.load(test_name)
        directory = RunDir(run_dir, overwrite=True) if run_dir is not None else None
        try:
            result = await session.train(run_dir=directory, usage=usage, gpus=hardware.gpu_count,
                                         stops=(BudgetGuard(card.budget),))
        finally:
            if directory is not None:
                directory.close()
        scored = await session.evaluate(result.best, test.examples)
    append_usage(usage.record, [usage_entry(test.manifest, role=role, use="report", run=name, command=command)])
    choice = session.choice
    return CellRun(
        method=result.method, batch_size=choice.kind.batch_size(choice.method, config), hardware=hardware.name,
        seed=config.seed,
        sim_seconds=result.train_sim_seconds, wall_seconds=result.train_wall_seconds,
        rollouts=result.rollouts, tokens=result.tokens, calls=result.calls, gpu_seconds=result.gpu_seconds,
        test_split=test_name, test_sha256=test.manifest.sha256,
        test_scores=scored.scores,
        selection_accuracy=result.best_val_accuracy, models=served_by(config), pools=pools_of(config),
        use_ground_truth=config.use_ground_truth, stopped_by=result.stopped_by,
        plan=tuple(row.batch_size for row in result.ledger if row.batch_size),
    )
