"""MLflow: ``mlflow.genai.optimize_prompts`` with Combee's optimizer against a local MLflow store (a
folder, no server) and a ``combee sim-server --peers``; the release gate's decisions moving the
prompt registry's aliases."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mlflow") is None or importlib.util.find_spec("pandas") is None,
                                reason="MLflow and pandas are not installed (the mlflow extra)")

from combee_fast.config import OnlineConfig, ReleaseConfig, SessionConfig, SimConfig, TaskConfig  # noqa: E402
from combee_fast.endpoint.blocking import BlockingChat  # noqa: E402
from combee_fast.gepa.candidate import Candidate  # noqa: E402
from combee_fast.gepa.online import OnlineCandidate  # noqa: E402
from combee_fast.schema import Rollout, Usage  # noqa: E402
from combee_fast.session import open_session  # noqa: E402
from combee_fast.tasks.registry import get_task  # noqa: E402

FORMULA = get_task("formula")
TRAIN = FORMULA.load("train[0:30]").examples
BY_QUESTION = {e.input: e for e in TRAIN}
SEED = "You answer financial formula questions. Give the final number."


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """MLflow on a folder store of this test's own: the tracking and registry URIs set."""
    import mlflow

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    yield mlflow
    mlflow.set_tracking_uri(None)


@pytest.mark.slow
def test_optimize_prompts_registers_the_learned_prompt_as_a_new_version(registry: Any, peers_sim_url: str) -> None:
    from mlflow.genai.scorers import scorer

    from combee_fast.integrations.mlflow import CombeePromptOptimizer

    prompt = registry.genai.register_prompt(name="formula-qa", template=SEED)
    chat = BlockingChat(peers_sim_url, "sim")

    def predict_fn(question: str) -> str:
        system = registry.genai.load_prompt(prompt.uri).format()
        return chat([{"role": "system", "content": system}, {"role": "user", "content": question}])

    @scorer
    def correct(inputs: dict[str, str], outputs: str, expectations: dict[str, str]) -> float:
        return FORMULA.score(BY_QUESTION[inputs["question"]], outputs.rsplit("Final answer:", 1)[-1].strip()).value

    optimizer = CombeePromptOptimizer(reflection_lm=peers_sim_url, max_metric_calls=150)
    try:
        result = registry.genai.optimize_prompts(
            predict_fn=predict_fn, prompt_uris=[prompt.uri], optimizer=optimizer, scorers=[correct],
            train_data=[{"inputs": {"question": e.input}, "outputs": e.target} for e in TRAIN], enable_tracking=False)
    finally:
        chat.close()
    learned = result.optimized_prompts[0]
    assert learned.name == "formula-qa" and learned.version == 2
    assert learned.template.startswith(SEED) and learned.template != SEED
    assert registry.genai.load_prompt("prompts:/formula-qa/2").template == learned.template
    assert result.final_eval_score > result.initial_eval_score
    assert optimizer.result.total_metric_calls <= 150


async def test_a_staged_release_that_rolls_back_moves_production_back(registry: Any) -> None:
    from combee_fast.embedded.online import OnlineLearner
    from combee_fast.integrations.mlflow import PromptAliases

    old = registry.genai.register_prompt(name="qa", template=SEED)
    new = registry.genai.register_prompt(name="qa", template=SEED + "\n- Convert percentages first.")
    registry.genai.set_prompt_alias("qa", alias="production", version=new.version)  # deployed too eagerly
    aliases = PromptAliases("qa")
    online = OnlineConfig(learner="gepa", batch_size=1024, max_wait_s=0.05,
                          release=ReleaseConfig(policy="staged", stages=(0.5, 1.0), margin=0.05))
    config = SessionConfig(learner="gepa", method="async-gepa", task=TaskConfig(train_split="train",
                           val_split="val[0:10]"), sim=SimConfig("flat", 1e-4))
    async with open_session(config) as session:
        incumbent = OnlineCandidate(Candidate({"system_prompt": SEED}))
        async with OnlineLearner(session.calls, incumbent, online, on_release=aliases) as learner:
            number = await learner.propose(OnlineCandidate(Candidate({"system_prompt": new.template})))
            await asyncio.to_thread(aliases.wait, 30)
            staged = registry.genai.load_prompt("prompts:/qa@production")
            assert staged.version == old.version  # the gate serves the candidate to a share only
            assert registry.genai.load_prompt("prompts:/qa@candidate").version == new.version
            for i, example in enumerate(TRAIN * 4):
                version = number if i % 2 else 0
                rollout = Rollout(example, i, (), "1", "", (), float(version == 0), "", Usage(), version=version)
                await learner.submit(rollout)
                if learner.release.candidate is None or learner.release.candidate.version != number:
                    break
            assert learner.release.incumbent.version == 0
    await asyncio.to_thread(aliases.wait, 30)
    assert registry.genai.load_prompt("prompts:/qa@production").version == old.version
    client = registry.MlflowClient()
    try:
        still = client.get_prompt_version_by_alias("qa", "candidate").version
    except Exception:
        still = None
    assert still != new.version  # the rolled-back version names no alias (a version learned since may)
    assert {SEED: 1, new.template: 2}.items() <= aliases.versions.items()  # found by their text, not registered again
