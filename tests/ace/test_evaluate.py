"""ACE's evaluation never folds failed calls into wrong answers (real HTTP against the simulated endpoint)."""

from __future__ import annotations

from combee_fast.ace.calls import AceCalls
from combee_fast.ace.evaluate import evaluate
from combee_fast.config import FaultConfig, SessionConfig, SimConfig, TaskConfig, TransportConfig
from combee_fast.ace.playbook import Playbook
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.session import open_session


def _config(faults: FaultConfig) -> SessionConfig:
    return SessionConfig(task=TaskConfig(train_split="train[0:40]", val_split="val[0:60]"),
                         sim=SimConfig("flat", 1e-4, faults=faults), transport=TransportConfig(max_retries=0))


def _answered(result) -> list[int]:
    return [i for i, (_, error) in enumerate(result.outcomes) if error is None]


async def test_accuracy_is_over_answered_examples_and_failures_are_counted_apart() -> None:
    async with open_session(_config(FaultConfig())) as session:
        learned = (await session.train(plan=FixedBatch(40))).final
        clean = await evaluate(AceCalls(session.calls), learned, session.val_split.examples, concurrency=16)
    async with open_session(_config(FaultConfig(rate_500=0.3))) as session:
        faulty = await evaluate(AceCalls(session.calls), learned, session.val_split.examples, concurrency=16)
    assert (clean.answered, clean.unanswered, clean.unanswered_by_kind) == (60, 0, {})
    assert faulty.unanswered > 0 and faulty.answered + faulty.unanswered == faulty.examples == 60
    assert faulty.unanswered_by_kind == {"5xx": faulty.unanswered}
    answered = _answered(faulty)
    assert len(answered) == faulty.answered and len(faulty.scores) == 60
    expected = sum(clean.scores[i] for i in answered) / len(answered)
    assert faulty.accuracy == expected  # the answered examples score as on a clean endpoint
    assert faulty.accuracy > sum(faulty.scores) / 60  # what folding failures in gave


async def test_an_empty_playbook_on_a_dead_generator_has_no_accuracy_to_report() -> None:
    async with open_session(_config(FaultConfig(rate_500=1.0))) as session:
        result = await evaluate(AceCalls(session.calls), Playbook.empty(), session.val_split.examples[:5], concurrency=4)
    assert (result.accuracy, result.answered, result.unanswered) == (0.0, 0, 5)
    assert result.first_error() and result.scores == (0.0,) * 5


async def test_a_repaired_answer_is_the_answer_a_clean_endpoint_gives() -> None:
    """Malformed replies get one repair request; the simulator answers it as the original prompt
    (it once read only the repair instruction and answered nothing, a silent wrong answer)."""
    async with open_session(_config(FaultConfig())) as session:
        clean = await evaluate(AceCalls(session.calls), Playbook.empty(), session.val_split.examples, concurrency=16)
    async with open_session(_config(FaultConfig(rate_malformed=0.4))) as session:
        faulty = await evaluate(AceCalls(session.calls), Playbook.empty(), session.val_split.examples, concurrency=16)
        repaired = session.server.counters().faults_injected["malformed"]
    assert repaired > 5 and faulty.answered > clean.answered - repaired
    assert all(faulty.scores[i] == clean.scores[i] for i in _answered(faulty))
