"""``combee_fast.optimize``: gepa's default adapter, a user's adapter and a plain evaluator, each
improving its validation score against a real ``combee sim-server --peers`` on loopback (or, for
the evaluator, a reflection model of the test's own served on loopback); a seed's search the same
whatever seconds the user's code takes."""

from __future__ import annotations

import importlib.util
import json
import random
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

import combee_fast
from combee_fast.config import EndpointSpec
from combee_fast.endpoint.blocking import BlockingChat
from combee_fast.errors import ConfigError, MetricError
from combee_fast.tasks.registry import get_task

FORMULA = get_task("formula")


TRAIN_EXAMPLES = FORMULA.load("train[0:40]").examples
VAL_EXAMPLES = [e for e in FORMULA.load("selection").examples
                if e.meta["formula"] in {t.meta["formula"] for t in TRAIN_EXAMPLES}][:30]
"""Validation rows asking for the formulas of the train rows (so lessons learned on one apply to
the other)."""
ROWS = {e.input: e for e in (*TRAIN_EXAMPLES, *VAL_EXAMPLES)}


def _rows(examples: Any) -> list[dict[str, Any]]:
    """gepa's default rows (``input``, ``answer``, ``additional_context``) of Formula examples."""
    return [{"input": e.input, "answer": e.target, "additional_context": {}} for e in examples]


TRAIN, VAL = _rows(TRAIN_EXAMPLES), _rows(VAL_EXAMPLES)
SEED = "You answer financial formula questions. Give the final number."


def _improved(result: combee_fast.OptimizeResult) -> None:
    """The best candidate beats the seed on the valset, and the result says what it cost."""
    assert result.best_score > result.val_aggregate_scores[0]
    assert result.candidates[result.best_idx] == (result.best_candidate if isinstance(result.best_candidate, dict)
                                                  else {"system_prompt": result.best_candidate})
    assert 1 <= result.accepted <= result.explored and len(result.candidates) == result.accepted + 1
    assert result.parents[0] == () and all(parents for parents in result.parents[1:])


@pytest.mark.skipif(importlib.util.find_spec("gepa") is None, reason="the gepa package is not installed (test extra)")
@pytest.mark.slow
def test_gepas_default_adapter_against_the_sim_server(peers_sim_url: str, tmp_path: Path) -> None:
    from gepa.adapters.default_adapter.default_adapter import DefaultAdapter

    chat = BlockingChat(peers_sim_url, "sim")
    try:
        result = combee_fast.optimize(SEED, TRAIN, VAL, adapter=DefaultAdapter(model=chat), reflection_lm=peers_sim_url,
                                      max_metric_calls=300, run_dir=tmp_path / "run")
    finally:
        chat.close()
    _improved(result)
    assert isinstance(result.best_candidate, str) and result.best_candidate.startswith(SEED)
    assert result.total_metric_calls <= 300 and result.method == "async-gepa"
    assert result.tokens_per_improvement is not None and result.tokens_per_improvement > 0
    assert result.dollars is None  # the endpoint has no price
    run = Path(result.run_dir or "")
    assert json.loads((run / "best.json").read_text())["components"]["system_prompt"] == result.best_candidate
    calls = json.loads((run / "calls.json").read_text())
    assert calls["gepa_solver"] == result.total_metric_calls and calls["gepa_proposer"] > 0


@pytest.mark.skipif(importlib.util.find_spec("gepa") is None, reason="the gepa package is not installed (test extra)")
@pytest.mark.slow
def test_combee_ace_learns_a_playbook_for_the_seed_with_gepas_default_adapter(peers_sim_url: str) -> None:
    from gepa.adapters.default_adapter.default_adapter import DefaultAdapter

    chat = BlockingChat(peers_sim_url, "sim")
    try:
        result = combee_fast.optimize(SEED, TRAIN, VAL, adapter=DefaultAdapter(model=chat), reflection_lm=peers_sim_url,
                                      method="combee-ace", max_metric_calls=80, minibatch=20)
    finally:
        chat.close()
    assert result.method == "combee" and result.candidates[0] == {"system_prompt": SEED}
    assert result.best_idx == 1 and result.best_score > result.val_aggregate_scores[0]
    assert isinstance(result.best_candidate, str) and result.best_candidate.startswith(SEED + "\n\n")
    assert "lesson" in result.best_candidate and result.accepted >= 1


@dataclass
class SleepyAdapter:
    """A user's adapter of two components: each row's evaluate sleeps like a model call, then asks
    the endpoint with both components as the system message; the task's scorer grades the reply."""

    url: str
    seconds: float = 0.02

    def __post_init__(self) -> None:
        self.chat = BlockingChat(self.url, "sim")
        self.lock = threading.Lock()
        self.in_flight = self.peak = self.calls = 0

    def evaluate(self, batch: list[dict[str, Any]], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        from gepa.core.adapter import EvaluationBatch

        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            time.sleep(self.seconds)
            system = f"{candidate['persona']}\n{candidate['lessons']}"
            outputs, scores, traces = [], [], []
            for row in batch:
                reply = self.chat([{"role": "system", "content": system}, {"role": "user", "content": row["input"]}])
                answer = reply.rsplit("Final answer:", 1)[-1].strip()
                score = FORMULA.score(ROWS[row["input"]], answer)
                outputs.append(answer)
                scores.append(score.value)
                traces.append({"question": row["input"], "answer": answer, "feedback": score.feedback})
            return EvaluationBatch(outputs=outputs, scores=scores, trajectories=traces if capture_traces else None)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.calls += len(batch)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, list[dict[str, Any]]]:
        return {name: list(eval_batch.trajectories) for name in components_to_update}


@pytest.mark.skipif(importlib.util.find_spec("gepa") is None, reason="the gepa package is not installed (test extra)")
def test_a_users_adapter_of_two_components_runs_its_blocking_evaluate_on_threads(peers_sim_url: str) -> None:
    adapter = SleepyAdapter(peers_sim_url)
    seed = {"persona": "You are a careful analyst.", "lessons": "Lessons:"}
    try:
        result = combee_fast.optimize(seed, TRAIN, VAL, adapter=adapter, reflection_lm=peers_sim_url, max_metric_calls=300,
                                      max_concurrency=6)
    finally:
        adapter.chat.close()
    _improved(result)
    assert set(result.best_candidate) == {"persona", "lessons"}
    assert adapter.calls == result.total_metric_calls
    assert adapter.peak == 6  # six rows at once, never more


WORDS = [f"w{i}" for i in range(10)]


def keyword_evaluator(candidate: str, row: dict[str, str]) -> tuple[float, str]:
    """1 when the candidate names the word the row needs, with feedback saying which is missing."""
    found = row["needs"] in candidate.split()
    return (1.0 if found else 0.0), ("right" if found else f"the answer lacked the word '{row['needs']}'")


def keyword_lm(prompt: str) -> str:
    """A reflection model: adds the words the feedback says are missing (and merges revisions by
    keeping every added line), replying in gepa's format: the new instruction in a fenced block."""
    if "<proposals>" in prompt:
        refs = re.findall(r"^\[(\d+\.\d+)\] ", prompt, re.MULTILINE)
        return orjson.dumps({"reasoning": "keep all", "remove": [], "keep": refs, "add": []}).decode()
    current = re.search(r"<current_instruction>\n(.*?)\n?</current_instruction>", prompt, re.DOTALL)
    assert current is not None
    missing = dict.fromkeys(re.findall(r"lacked the word '(\w+)'", prompt))
    added = "".join(f"\n{word}" for word in missing if word not in current.group(1).split())
    return f"The feedback names missing words.\n```\n{current.group(1)}{added}\n```"


def test_a_plain_evaluator_with_a_callable_reflection_model() -> None:
    train = [{"input": f"q{i}", "needs": WORDS[i % 10]} for i in range(30)]
    val = [{"input": f"v{i}", "needs": WORDS[(3 * i) % 10]} for i in range(10)]
    result = combee_fast.optimize("Answer.", train, val, evaluator=keyword_evaluator, reflection_lm=keyword_lm,
                                  max_metric_calls=200)
    _improved(result)
    assert isinstance(result.best_candidate, str) and result.best_candidate.startswith("Answer.")
    assert result.tokens > 0  # the callable's calls went through the engine (their tokens estimated)


def _pool(method: str, *, evaluator_s: float, reflection_s: float, draws: int) -> tuple[Any, ...]:
    """The candidates, parents, validation scores and metric calls of a seed-3 search whose
    evaluator and reflection model (:func:`keyword_evaluator` and :func:`keyword_lm`) sleep before
    each call a random draw (seeded ``draws``) of up to ``evaluator_s`` and ``reflection_s``."""
    pause, lock = random.Random(draws), threading.Lock()

    def sleep(most: float) -> None:
        with lock:
            seconds = pause.random() * most
        time.sleep(seconds)

    def evaluator(candidate: str, row: dict[str, str]) -> tuple[float, str]:
        sleep(evaluator_s)
        return keyword_evaluator(candidate, row)

    def reflection_lm(prompt: str) -> str:
        sleep(reflection_s)
        return keyword_lm(prompt)

    train = [{"input": f"q{i}", "needs": WORDS[i % 10]} for i in range(30)]
    val = [{"input": f"v{i}", "needs": WORDS[(3 * i) % 10]} for i in range(10)]
    result = combee_fast.optimize("Answer.", train, val, evaluator=evaluator, reflection_lm=reflection_lm,
                                  max_metric_calls=200, method=method, seed=3)
    return result.candidates, result.parents, result.val_aggregate_scores, result.total_metric_calls


@pytest.mark.parametrize("method", ["async-gepa", "combee-gepa"])
def test_a_seed_gives_the_same_search_whatever_seconds_the_users_code_takes(method: str) -> None:
    first = _pool(method, evaluator_s=0.05, reflection_s=0.0, draws=1)
    assert len(first[0]) > 2  # children joined: their order and parents are what could differ
    assert _pool(method, evaluator_s=0.0, reflection_s=0.1, draws=2) == first


def test_a_run_that_failed_is_resumed_from_its_run_folder(tmp_path: Path) -> None:
    train = [{"input": f"q{i}", "needs": WORDS[i % 10]} for i in range(30)]
    calls = 0

    def failing_late(candidate: str, row: dict[str, str]) -> tuple[float, str]:
        nonlocal calls
        calls += 1
        if calls > 70:
            raise RuntimeError("the evaluator's service went away")
        return keyword_evaluator(candidate, row)

    options: dict[str, Any] = {"reflection_lm": keyword_lm, "run_dir": tmp_path / "run", "max_metric_calls": 150,
                               "max_concurrency": 1}
    with pytest.raises(MetricError, match="the evaluator's service went away"):
        combee_fast.optimize("Answer.", train, train[:10], evaluator=failing_late, **options)
    assert "failed" in json.loads((tmp_path / "run" / "summary.json").read_text())
    resumed = combee_fast.optimize("Answer.", train, train[:10], evaluator=keyword_evaluator, **options)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["resumed_from_step"] >= 1 and resumed.total_metric_calls <= 150
    assert resumed.best_score > resumed.val_aggregate_scores[0]
    again = combee_fast.optimize("Answer.", train, train[:10], evaluator=keyword_evaluator, **options)
    assert again.candidates == resumed.candidates  # a finished run is not run again
    with pytest.raises(ConfigError, match="changed since it was recorded"):
        combee_fast.optimize("Answer.", train[1:], train[:10], evaluator=keyword_evaluator, **options)


def test_a_batch_evaluator_is_never_called_twice_at_once_and_gets_a_gradings_rows_together() -> None:
    train = [{"input": f"q{i}", "needs": WORDS[i % 10]} for i in range(30)]
    busy = threading.Lock()
    sizes: list[int] = []

    def batch(candidate: str, rows: list[dict[str, str]]) -> list[tuple[float, str]]:
        assert busy.acquire(blocking=False), "called while another call ran"
        try:
            time.sleep(0.01)
            sizes.append(len(rows))
            return [keyword_evaluator(candidate, row) for row in rows]
        finally:
            busy.release()

    result = combee_fast.optimize("Answer.", train, train[:10], batch_evaluator=batch, reflection_lm=keyword_lm,
                                  max_metric_calls=150)
    _improved(result)
    assert sum(sizes) == result.total_metric_calls and max(sizes) >= 8  # the validation's rows in a call or two


def test_a_dollar_budget_stops_the_search_at_the_reflection_endpoints_price(peers_sim_url: str) -> None:
    train = [{"input": f"q{i}", "needs": WORDS[i % 10]} for i in range(30)]
    priced = EndpointSpec(url=peers_sim_url, model="sim", price_in=1000.0, price_out=1000.0)  # $0.001 a token
    result = combee_fast.optimize("Answer.", train, train[:10], evaluator=keyword_evaluator, reflection_lm=priced,
                                  max_dollars=1.0)
    assert result.stopped_by is not None and result.stopped_by.startswith("dollar budget spent")
    assert result.dollars is not None and result.dollars >= 1.0


async def test_an_async_evaluator_is_awaited_and_an_exception_names_the_row() -> None:
    async def evaluator(candidate: str, row: dict[str, str]) -> float:
        if row["input"] == "v3":
            raise KeyError("no such field")
        return keyword_evaluator(candidate, row)[0]

    val = [{"input": f"v{i}", "needs": "w1"} for i in range(5)]
    with pytest.raises(MetricError, match=r"evaluator raised KeyError: 'no such field' \(on val row 3\)"):
        await combee_fast.optimize_async("Answer.", val, val, evaluator=evaluator, reflection_lm=keyword_lm,
                                         max_metric_calls=50)
    with pytest.raises(ConfigError, match="inside a running event loop"):
        combee_fast.optimize("Answer.", val, val, evaluator=evaluator, reflection_lm=keyword_lm, max_metric_calls=50)


@pytest.mark.parametrize(("options", "message"), [
    ({"evaluator": keyword_evaluator, "task_lm": keyword_lm}, "not evaluator and task_lm"),
    ({"task_lm": keyword_lm}, "task_lm= and metric= go together"),
    ({"evaluator": keyword_evaluator, "method": "textgrad"}, "unknown method 'textgrad'"),
    ({"evaluator": keyword_evaluator, "max_metric_calls": None}, "give a budget"),
    ({"evaluator": keyword_evaluator, "max_metric_calls": None, "max_dollars": 1.0, "method": "combee-ace"},
     "needs max_metric_calls"),
    ({"evaluator": keyword_evaluator, "max_dollars": 1.0}, "max_dollars needs the price"),
    ({"evaluator": keyword_evaluator, "reflection_lm": "openai/gpt-4o"}, "reflection_lm must be a callable"),
])
def test_arguments_that_make_no_search_are_refused_in_one_line(options: dict[str, Any], message: str) -> None:
    given = {"reflection_lm": keyword_lm, "max_metric_calls": 50, **options}
    with pytest.raises(ConfigError, match=message):
        combee_fast.optimize("Answer.", [{"input": "q", "needs": "w1"}], **given)
