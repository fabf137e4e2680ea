"""``gepa.optimize`` against ``combee_fast.optimize`` on the same adapter and the same metric-call
budget, in wall seconds.

    pip install -e '.[test]'           # the gepa package (0.1.4)
    python bench/optimize.py           # 40 ms a metric call, 8 at once, 400 metric calls

One ``combee sim-server --peers`` (real HTTP on loopback) answers both searches. The adapter is a
user's adapter in the ``gepa`` package's protocol (``evaluate``, ``make_reflective_dataset``): for
each row it sleeps ``--latency`` seconds (a model call's latency) and asks the endpoint with the
candidate as the system message; the Formula task's scorer grades the reply (score and feedback).
Both searches start from the same seed instruction, on the same train rows, validate on the same
rows (Formula ``selection`` rows asking for the train rows' formulas) and reflect with the same
callable (a blocking chat on the endpoint, as gepa takes one); each runs with its defaults
otherwise: gepa's loop grades one row at a time (its adapter's ``evaluate`` takes a batch and runs
its rows in turn), ``combee_fast.optimize`` runs ``async-gepa`` with ``--concurrency`` of the
user's calls at once.

Validation scores are each search's best candidate's mean on the validation rows, as each
reports it. The endpoint's peers answer the reflection prompts with prose (a guidance line per
revision), not with the task world's lessons (:mod:`combee_fast.sim.peers`), so neither search is
expected to learn much here: this bench measures time on the same budget, not what a real
reflection model would learn.

The physical limit: every metric call holds one of the ``--concurrency`` slots for at least
``--latency`` seconds, so Combee's search takes at least ``metric calls x latency / concurrency``;
``slot_use`` (that over its wall seconds) cannot exceed 1 and is refused above it
(:func:`physics.physical_ratio`), and so is a baseline that made no metric call.

Last line: ``optimize_speedup=<gepa s / combee s> gepa_s=<s> combee_s=<s> latency_ms=<ms>
concurrency=<n> gepa_val=<score> combee_val=<score> gepa_metric_calls=<n> combee_metric_calls=<n>
slot_use=<ratio>``.

``--mlflow`` measures the MLflow door instead: ``mlflow.genai.optimize_prompts`` with
:class:`~combee_fast.integrations.mlflow.CombeePromptOptimizer` on a local folder store, its
``predict_fn`` the same per-row sleep and chat. MLflow's ``eval_fn`` is not thread-safe, so the
search calls it one call at a time, each with every row of one candidate waiting by then, and
``eval_fn`` runs a call's rows on its own ``MLFLOW_GENAI_EVAL_MAX_WORKERS`` threads (default 10).
The same search runs twice side by side: with one of the user's calls at a time (each grading's
rows then reach ``eval_fn`` one by one, as calling a non-thread-safe function row by row does),
and with ``--concurrency`` (the grading's rows reach it together). ``mlflow_speedup`` is the
first's search seconds over the second's; ``parallelism`` the sleep the second's rows held (rows
x latency) over its search seconds: how many rows ran at once on average; it cannot exceed the
eval workers (``slot_use``, refused above 1). Last line: ``mlflow_speedup=<x>
mlflow_parallelism=<x> rows_per_eval_call=<mean> eval_calls=<n> serial_eval_calls=<n>
metric_calls=<n> latency_ms=<ms> eval_workers=<n> slot_use=<ratio> serial_s=<s> search_s=<s>
initial_score=<s> final_score=<s>``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from combee_fast.endpoint.blocking import BlockingChat
from combee_fast.optimizing import optimize  # imported here, as gepa is: neither search's time counts an import
from combee_fast.schema import Example
from combee_fast.tasks.registry import get_task
from physics import WrongWorld, check_baseline, guarded, physical_ratio

try:
    import gepa
except ImportError:  # the test extra brings it
    gepa = None

SEED = "You answer financial formula questions. Read the question and give the final number."
TASK = get_task("formula")


class SleepyAdapter:
    """A user's gepa adapter (module docstring): per row, ``latency`` seconds, then one chat on
    the endpoint, graded by the Formula scorer. Thread-safe (its chat is)."""

    def __init__(self, chat: BlockingChat, rows: dict[str, Example], latency: float) -> None:
        self.chat, self.rows, self.latency = chat, rows, latency

    def evaluate(self, batch: list[dict[str, Any]], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        from gepa.core.adapter import EvaluationBatch

        outputs, scores, traces = [], [], []
        for row in batch:
            time.sleep(self.latency)
            reply = self.chat([{"role": "system", "content": candidate["system_prompt"]},
                               {"role": "user", "content": row["input"]}])
            answer = reply.rsplit("Final answer:", 1)[-1].strip()
            score = TASK.score(self.rows[row["input"]], answer)
            outputs.append(answer)
            scores.append(score.value)
            traces.append({"question": row["input"], "answer": answer, "feedback": score.feedback})
        return EvaluationBatch(outputs=outputs, scores=scores, trajectories=traces if capture_traces else None)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, list[dict[str, Any]]]:
        return {name: list(eval_batch.trajectories) for name in components_to_update}


class _Quiet:
    def log(self, message: str) -> None:
        pass


@contextmanager
def sim_server(time_scale: float) -> Iterator[str]:
    """A ``combee sim-server --peers`` process on a free loopback port: its base URL."""
    server = subprocess.Popen([sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0", "--peers",
                               "--time-scale", repr(time_scale)], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    try:
        words = server.stdout.readline().split()
        if words[:2] != ["listening", "on"]:
            raise WrongWorld(f"the sim-server did not start: {' '.join(words)!r}")
        yield words[2]
    finally:
        server.terminate()
        server.wait(timeout=30)


def rows(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Example]]:
    """The train rows, the validation rows (asking for the train rows' formulas) and each row's example."""
    train = TASK.load(f"train[0:{args.train}]").examples
    formulas = {e.meta["formula"] for e in train}
    val = [e for e in TASK.load("selection").examples if e.meta["formula"] in formulas][: args.val]
    shaped = [[{"input": e.input, "answer": e.target, "additional_context": {}} for e in part] for part in (train, val)]
    return shaped[0], shaped[1], {e.input: e for e in (*train, *val)}


def measure_mlflow(args: argparse.Namespace, url: str, examples: dict[str, Example],
                   train: list[dict[str, Any]]) -> int:
    """``--mlflow`` (module docstring): ``optimize_prompts`` on a folder store in a temporary
    folder, once with one of the user's calls at a time (``eval_fn`` row by row), once with
    ``--concurrency``."""
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    from mlflow.environment_variables import MLFLOW_GENAI_EVAL_MAX_WORKERS

    serial, batched = (optimize_prompts_once(args, url, examples, train, concurrency) for concurrency in (1, args.concurrency))
    workers = MLFLOW_GENAI_EVAL_MAX_WORKERS.get()
    for name, (optimizer, scores) in (("one at a time", serial), (f"{args.concurrency} at once", batched)):
        print(f"{name}: {optimizer.eval_rows} rows in {optimizer.eval_calls} eval_fn calls "
              f"({optimizer.eval_rows / optimizer.eval_calls:.1f} rows each) in {optimizer.result.wall_seconds:.2f} s; "
              f"score {scores[0]:.3f} -> {scores[1]:.3f}")
    optimizer, (initial, final) = batched
    parallelism = optimizer.eval_rows * args.latency / optimizer.result.wall_seconds
    slot_use = physical_ratio("slot_use", parallelism / workers)
    print(f"mlflow_speedup={serial[0].result.wall_seconds / optimizer.result.wall_seconds:.2f} "
          f"mlflow_parallelism={parallelism:.2f} rows_per_eval_call={optimizer.eval_rows / optimizer.eval_calls:.2f} "
          f"eval_calls={optimizer.eval_calls} serial_eval_calls={serial[0].eval_calls} "
          f"metric_calls={optimizer.result.total_metric_calls} latency_ms={1e3 * args.latency:.0f} "
          f"eval_workers={workers} slot_use={slot_use:.3f} serial_s={serial[0].result.wall_seconds:.2f} "
          f"search_s={optimizer.result.wall_seconds:.2f} initial_score={initial:.4f} final_score={final:.4f}")
    return 0


def optimize_prompts_once(args: argparse.Namespace, url: str, examples: dict[str, Example],
                          train: list[dict[str, Any]], concurrency: int) -> tuple[Any, tuple[float, float]]:
    """One ``optimize_prompts`` on a fresh folder store: the optimizer and (initial, final) scores."""
    import tempfile
    from pathlib import Path

    import mlflow
    from mlflow.genai.scorers import scorer

    from combee_fast.integrations.mlflow import CombeePromptOptimizer

    with tempfile.TemporaryDirectory(prefix="combee-mlflow-") as folder:
        uri = (Path(folder) / "mlruns").as_uri()
        mlflow.set_tracking_uri(uri)
        mlflow.set_registry_uri(uri)
        prompt = mlflow.genai.register_prompt(name="formula-qa", template=SEED)
        chat = BlockingChat(url, "sim")

        def predict_fn(question: str) -> str:
            time.sleep(args.latency)
            system = mlflow.genai.load_prompt(prompt.uri).format()
            return chat([{"role": "system", "content": system}, {"role": "user", "content": question}])

        @scorer
        def correct(inputs: dict[str, str], outputs: str) -> float:
            return TASK.score(examples[inputs["question"]], outputs.rsplit("Final answer:", 1)[-1].strip()).value

        optimizer = CombeePromptOptimizer(reflection_lm=url, max_metric_calls=args.budget, max_concurrency=concurrency,
                                          seed=args.seed)
        try:
            result = mlflow.genai.optimize_prompts(
                predict_fn=predict_fn, prompt_uris=[prompt.uri], optimizer=optimizer, scorers=[correct],
                train_data=[{"inputs": {"question": row["input"]}, "outputs": row["answer"]} for row in train],
                enable_tracking=False)
        finally:
            chat.close()
    return optimizer, (result.initial_eval_score, result.final_eval_score)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.04, help="seconds each metric call sleeps (default 0.04)")
    parser.add_argument("--concurrency", type=int, default=8, help="combee's metric calls at once (default 8)")
    parser.add_argument("--budget", type=int, default=400, help="metric calls for each search (default 400)")
    parser.add_argument("--train", type=int, default=60, help="train rows (default 60)")
    parser.add_argument("--val", type=int, default=30, help="validation rows (default 30)")
    parser.add_argument("--time-scale", type=float, default=0.001, help="the sim-server's time scale (default 0.001)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mlflow", action="store_true", help="measure the MLflow door instead (module docstring)")
    args = parser.parse_args()
    if args.mlflow:
        train, _, examples = rows(args)
        with sim_server(args.time_scale) as url:
            return measure_mlflow(args, url, examples, train)
    if gepa is None:
        raise WrongWorld("the gepa package is not installed (pip install -e '.[test]'): there is no baseline")
    train, val, examples = rows(args)
    with sim_server(args.time_scale) as url:
        chat = BlockingChat(url, "sim")
        try:
            adapter = SleepyAdapter(chat, examples, args.latency)
            started = time.perf_counter()
            theirs = gepa.optimize(seed_candidate={"system_prompt": SEED}, trainset=train, valset=val, adapter=adapter,
                                   reflection_lm=chat, max_metric_calls=args.budget, seed=args.seed, logger=_Quiet())
            gepa_s = time.perf_counter() - started
            started = time.perf_counter()
            ours = optimize({"system_prompt": SEED}, train, val, adapter=adapter, reflection_lm=chat,
                                        max_metric_calls=args.budget, max_concurrency=args.concurrency, seed=args.seed)
            combee_s = time.perf_counter() - started
        finally:
            chat.close()
    gepa_calls = theirs.total_metric_calls or 0
    check_baseline("gepa.optimize", gepa_s, done=min(gepa_calls, args.budget), expected=args.budget)
    floor_s = ours.total_metric_calls * args.latency / args.concurrency
    slot_use = physical_ratio("slot_use", floor_s / combee_s)
    gepa_val = theirs.val_aggregate_scores[theirs.best_idx]
    print(f"gepa.optimize: {gepa_s:.2f} s, {gepa_calls} metric calls, validation {gepa_val:.3f}")
    print(f"combee_fast.optimize ({ours.method}, {args.concurrency} at once): {combee_s:.2f} s, "
          f"{ours.total_metric_calls} metric calls, validation {ours.best_score:.3f}; at least {floor_s:.2f} s "
          f"({ours.total_metric_calls} calls x {1e3 * args.latency:.0f} ms / {args.concurrency})")
    print(f"optimize_speedup={gepa_s / combee_s:.2f} gepa_s={gepa_s:.2f} combee_s={combee_s:.2f} "
          f"latency_ms={1e3 * args.latency:.0f} concurrency={args.concurrency} gepa_val={gepa_val:.4f} "
          f"combee_val={ours.best_score:.4f} gepa_metric_calls={gepa_calls} combee_metric_calls={ours.total_metric_calls} "
          f"slot_use={slot_use:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, "bench/optimize.py"))
