"""DSPy: a two-predictor program compiled by :class:`CombeeOptimizer` against a ``combee sim-server
--peers``, its calls made by DSPy's own LM client (litellm's OpenAI client)."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("dspy") is None, reason="DSPy is not installed (the dspy extra)")

from combee_fast.tasks.registry import get_task  # noqa: E402

FORMULA = get_task("formula")
TRAIN_EXAMPLES = FORMULA.load("train[0:40]").examples
VAL_EXAMPLES = [e for e in FORMULA.load("selection").examples
                if e.meta["formula"] in {t.meta["formula"] for t in TRAIN_EXAMPLES}][:24]
BY_QUESTION = {e.input: e for e in (*TRAIN_EXAMPLES, *VAL_EXAMPLES)}


def _accuracy(program: Any, examples: list[Any], lm: Any) -> float:
    import dspy

    with dspy.context(lm=lm):
        return sum(_metric(e, program(**e.inputs())).score for e in examples) / len(examples)


def _metric(example: Any, prediction: Any, trace: Any = None) -> Any:
    import dspy

    score = FORMULA.score(BY_QUESTION[example.question], str(prediction.answer))
    return dspy.Prediction(score=score.value, feedback=score.feedback)


@pytest.mark.slow
def test_a_two_predictor_program_learns_its_instructions_through_dspys_own_client(peers_sim_url: str) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its cost map
    import dspy

    from combee_fast.integrations.dspy import CombeeOptimizer

    class Solve(dspy.Module):
        def __init__(self) -> None:
            super().__init__()
            self.restate = dspy.Predict("question -> restated")
            self.solve = dspy.ChainOfThought("question, restated -> answer")

        def forward(self, question: str) -> Any:
            return self.solve(question=question, restated=self.restate(question=question).restated)

    lm = dspy.LM("openai/sim", api_base=peers_sim_url, api_key="none", cache=False, temperature=0.0, max_tokens=1024)
    shaped = [[dspy.Example(question=e.input, answer=e.target).with_inputs("question") for e in part]
              for part in (TRAIN_EXAMPLES, VAL_EXAMPLES)]
    student = Solve()
    optimizer = CombeeOptimizer(_metric, reflection_lm=peers_sim_url, lm=lm, max_metric_calls=300)
    compiled = optimizer.compile(student, trainset=shaped[0], valset=shaped[1])

    seed = {name: p.signature.instructions for name, p in student.named_predictors()}
    learned = {name: p.signature.instructions for name, p in compiled.named_predictors()}
    assert set(learned) == set(seed) == {"restate", "solve.predict"} and learned != seed
    assert optimizer.result.best_score > optimizer.result.val_aggregate_scores[0]
    assert _accuracy(compiled, shaped[1], lm) > _accuracy(student, shaped[1], lm)
