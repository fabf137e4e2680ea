"""The TextGrad learner over real HTTP (the in-process simulated endpoint plays the task world),
driven by the generic methods: each method's step makes the roles it should, the map chain
stops at its first failed call, and a run is the same whatever order its requests complete in."""

from __future__ import annotations

import msgspec
import pytest

from combee_fast.config import FaultConfig, SessionConfig, SimConfig, TaskConfig, TrainConfig, TransportConfig
from combee_fast.record.ledger import ledger_row
from combee_fast.session import open_session
from combee_fast.textgrad.calls import FORWARD_ROLE, GRADIENT_ROLE, LOSS_ROLE, REDUCE_ROLE, STEP_ROLE
from combee_fast.textgrad.kind import TEXTGRAD, calls_of
from combee_fast.textgrad.learner import GradientTrace, TextGradLearner
from combee_fast.textgrad.variable import PromptVariable


def _config(method: str = "combee", **changes: object) -> SessionConfig:
    base = SessionConfig(learner="textgrad", method=method, task=TaskConfig(train_split="train[0:24]",
                         val_split="val[0:10]"), sim=SimConfig("flat", 1e-4), train=TrainConfig(batch_size=12))
    return msgspec.structs.replace(base, **changes)


async def test_a_chain_is_forward_loss_gradient_and_its_record_is_the_gradient() -> None:
    async with open_session(_config()) as session:
        learner = TextGradLearner(calls_of(session.context))
        seed = PromptVariable.seed()
        trace = await learner.run_item(session.train_split.examples[0], seed, seed.render(), epoch=0, rounds=3)
    assert isinstance(trace, GradientTrace)
    assert [usage.role for usage, _ in trace.call_outcomes()] == [FORWARD_ROLE, LOSS_ROLE, GRADIENT_ROLE]
    assert trace.errors() == [] and trace.reward == trace.forward.score and trace.sim_seconds > 0
    record = learner.record(trace)
    assert record is trace.gradient and learner.insight(record) == record.change != ""
    assert record.verdict == ("correct" if trace.forward.score >= 1 else "incorrect")
    assert learner.continuation(trace, seed, seed.render(), epoch=0) is None


async def test_a_failed_forward_ends_the_chain_with_no_record() -> None:
    config = _config(sim=SimConfig("flat", 1e-4, faults=FaultConfig(rate_500=1.0)),
                     transport=TransportConfig(max_retries=0))
    async with open_session(config, check=False) as session:
        learner = TextGradLearner(calls_of(session.context))
        seed = PromptVariable.seed()
        trace = await learner.run_item(session.train_split.examples[0], seed, seed.render(), epoch=0, rounds=1)
        failures = list(session.calls.failures)
    assert [usage.role for usage, _ in trace.call_outcomes()] == [FORWARD_ROLE]
    assert trace.loss is None and learner.record(trace) is None
    assert [kind for kind, _ in trace.errors()] == [f"{trace.item_id}:forward"]
    assert failures and failures[0]["role"] == FORWARD_ROLE and failures[0]["label"] == "5xx"  # errors.jsonl's record


@pytest.mark.parametrize(("method", "steps", "reduces"), [("sequential", (1, 12), 0), ("naive", (1, 1), 0),
                                                         ("combee", (3, 3), 1)])
async def test_each_method_makes_its_roles_calls_recorded_per_role(method: str, steps: tuple[int, int],
                                                                   reduces: int) -> None:
    async with open_session(_config(method)) as session:
        built = session.method()
        items = session.train_split.examples[:12]
        result = await built.step(items, TEXTGRAD.initial(session.config), epoch=0, step=0)
    kind = session.choice.kind  # TextGrad completed with the defaults it leaves out (combee_fast.kinds)
    row = ledger_row(built.name, 0, 0, "fixed", 12, result, result.sim_seconds, rollout_role=kind.rollout_role)
    assert row.method == kind.methods[method]
    assert {role: row.calls[role] for role in (FORWARD_ROLE, LOSS_ROLE, GRADIENT_ROLE)} == dict.fromkeys(
        (FORWARD_ROLE, LOSS_ROLE, GRADIENT_ROLE), 12)
    assert steps[0] <= row.calls[STEP_ROLE] <= steps[1] and row.calls.get(REDUCE_ROLE, 0) == reduces
    assert row.rollouts == 12 and not row.errors
    assert 1 <= result.artifact.version <= len(result.reports) == (12 if method == "sequential" else 1)
    assert len(result.artifact) > len(PromptVariable.seed())
    assert set(result.kept) <= set(result.proposed) and len(result.kept) == row.added > 0


async def test_a_combee_textgrad_run_is_the_same_at_any_concurrency(tmp_path) -> None:
    finals = []
    for concurrency in (1, 64):
        async with open_session(_config(transport=TransportConfig(concurrency=concurrency))) as session:
            result = await session.train()
        finals.append(result.final.to_bytes())
        assert result.learner == "textgrad" and result.method == "combee-textgrad" and result.steps == 2
    assert finals[0] == finals[1]
