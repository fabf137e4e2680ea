"""The paper's step, and the two methods it is measured against, driven by a small learner of
our own (``fake_learner``): no HTTP, no task world; what each method must do, call by call."""

from __future__ import annotations

import math
import random

import pytest

from combee_fast.combee.shuffle import augmented_groups
from combee_fast.config import CombeeConfig, MapConfig
from combee_fast.engine.rng import rng_at
from combee_fast.methods import METHODS, build_method
from combee_fast.methods.base import StepShape
from combee_fast.methods.combee import Combee
from combee_fast.methods.naive import Naive
from combee_fast.methods.sequential import Sequential
from tests.methods.fake_learner import Notes, NotesLearner

ITEMS = [f"item {i}{'!' if i % 3 == 0 else ''}" for i in range(25)]
MAP = MapConfig(sync_rounds=None)


async def test_combee_runs_sqrt_n_proposers_over_the_augmented_shuffle_then_one_apply() -> None:
    learner = NotesLearner()
    combee = CombeeConfig(duplicates=2, max_fan_in=8, max_reduce_ops=None)
    result = await Combee(learner, MAP, combee, seed=7).step(ITEMS, Notes(), epoch=0, step=3)
    groups = augmented_groups(25, 2, rng_at(7, "shuffle", 0, 3))
    assert len(groups) == math.isqrt(25) == 5
    assert [records for _, records in sorted(learner.proposed)] == [
        tuple(f"lesson of {ITEMS[i].rstrip('!')}" for i in members) for members in groups]
    assert learner.merged == [5]  # one merge call reads the five proposals
    assert result.artifact.version == 1 and len(result.artifact) == 25  # every lesson, applied once
    assert result.rewards == tuple(1.0 if item.endswith("!") else 0.0 for item in ITEMS)
    # the critical path: the map (one 1 s call per item, all at once), a proposer (2 s), the reducer (3 s)
    assert result.sim_seconds == pytest.approx(1.0 + 2.0 + 3.0)
    assert sorted(result.insights) == sorted(f"lesson of {item.rstrip('!')}" for item in ITEMS)


async def test_the_reduce_tree_never_merges_more_than_its_fan_in() -> None:
    learner = NotesLearner()
    items = [f"item {i}" for i in range(100)]  # 10 groups
    await Combee(learner, MAP, CombeeConfig(max_fan_in=4, max_reduce_ops=None), seed=0).step(items, Notes(), epoch=0, step=0)
    assert learner.merged == [4, 4, 2, 3]  # 10 proposals -> 4 + 4 + 2 -> 1 call over 3


async def test_what_is_learned_does_not_depend_on_the_order_calls_complete_in() -> None:
    learned = []
    for seed in range(4):
        learner = NotesLearner(jitter=random.Random(seed))
        result = await Combee(learner, MAP, CombeeConfig(), seed=11).step(ITEMS, Notes(), epoch=1, step=2)
        learned.append(result.artifact)
    assert learned[0] == learned[1] == learned[2] == learned[3]


async def test_a_step_shape_from_the_plan_overrides_the_groups_for_that_step_only() -> None:
    learner = NotesLearner()
    method = Combee(learner, MAP, CombeeConfig(max_reduce_ops=None), seed=0)
    await method.step(ITEMS, Notes(), epoch=0, step=0, shape=StepShape(max_group=3, duplicates=1))
    assert len(learner.proposed) == math.ceil(25 / 3) and max(len(r) for _, r in learner.proposed) <= 3
    learner.proposed.clear()
    await method.step(ITEMS, Notes(), epoch=0, step=1)
    assert len(learner.proposed) == 5


async def test_chains_still_retrying_leave_their_step_are_checkpointed_and_resumed() -> None:
    items = ["a", "b?", "c", "d?"]
    map_config = MapConfig(sync_rounds=1)
    first = Combee(NotesLearner(), map_config, CombeeConfig(), seed=0)
    step = await first.step(items, Notes(), epoch=0, step=0)
    assert first.pending() == 2 and set(step.artifact.lessons) == {"lesson of a", "lesson of c"}
    carried = first.carried()
    assert carried is not None and [item for item, _ in carried.chains] == ["b?", "d?"]
    assert carried.snapshot == Notes() and carried.epoch == 0
    again = Combee(NotesLearner(), map_config, CombeeConfig(), seed=0)  # a resumed process
    await again.resume(carried, {item: item for item in items})
    drained = [await method.step([], step.artifact, epoch=0, step=1) for method in (first, again)]
    assert drained[0].artifact == drained[1].artifact
    assert "lesson of b (retried)" in drained[0].artifact.lessons and first.pending() == again.pending() == 0


async def test_naive_reads_every_record_in_one_proposer_call() -> None:
    learner = NotesLearner()
    result = await Naive(learner, MAP).step(ITEMS, Notes(), epoch=0, step=0)
    assert [len(records) for _, records in learner.proposed] == [25] and learner.merged == []
    assert result.sim_seconds == pytest.approx(1.0 + 2.0) and result.artifact.version == 1


async def test_sequential_applies_after_every_item_so_each_sees_the_last() -> None:
    learner = NotesLearner()
    result = await Sequential(learner, MAP).step(["x", "y", "x"], Notes(), epoch=0, step=0)
    assert [records for _, records in learner.proposed] == [("lesson of x",), ("lesson of y",), ("lesson of x",)]
    assert result.artifact.lessons == ("lesson of x", "lesson of y") and result.artifact.version == 2
    assert result.sim_seconds == pytest.approx(3 * (1.0 + 2.0))  # every call on the critical path


def test_every_method_is_registered_by_name_and_carries_nothing_it_cannot_resume() -> None:
    assert set(METHODS) == {"sequential", "naive", "combee"}
    for name in METHODS:
        method = build_method(name, NotesLearner(), MAP, CombeeConfig(), seed=0)
        assert method.name == name and method.pending() == 0 and method.carried() is None
