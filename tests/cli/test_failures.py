"""Failure semantics of the real `combee` process: nothing lost, nothing silent."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from aiohttp import web

from combee_fast.errors import EXIT_CALLS_FAILED, EXIT_USAGE
from tests.cli.test_cli import _combee
from tests.conftest import ThreadedServer

FAST = ("--sim-preset", "flat", "--time-scale", "0.0001")


async def _not_found(request: web.BaseRequest) -> web.Response:
    return web.Response(status=404, text="404 page not found")


async def _prose_completions(request: web.BaseRequest) -> web.Response:
    if request.path.endswith("/models"):
        return web.json_response({"object": "list", "data": [{"id": "m"}]})
    return web.Response(text="I'm sorry, I can't help with that.", content_type="text/plain")


async def _not_implemented(request: web.BaseRequest) -> web.Response:
    return web.Response(status=501, text="Not Implemented")


async def _html(request: web.BaseRequest) -> web.Response:
    return web.Response(text="<!doctype html><title>Welcome to nginx!</title>", content_type="text/html")


async def _prose(request: web.BaseRequest) -> web.Response:
    return web.Response(text="Hello! I am a friendly server.", content_type="text/plain")


@pytest.mark.parametrize("handler, why", [
    (_not_found, "HTTP 404"), (_not_implemented, "HTTP 501"), (_html, "not a chat completion"),
    (_prose, "not a chat completion"),
])
def test_an_endpoint_not_serving_the_model_fails_the_start_up_check_with_exit_2(tmp_path, handler, why) -> None:
    with ThreadedServer(handler) as server:
        done = _combee("learn", "--endpoint", server.url, "--model", "m", "--out", str(tmp_path / "r"))
    assert done.returncode == EXIT_USAGE
    assert done.stderr.count("\n") == 1 and "does not serve model 'm'" in done.stderr and why in done.stderr
    assert done.stdout == "" and not (tmp_path / "r").exists()


def test_a_run_whose_every_call_fails_exits_3_naming_the_failure_and_the_playbook(tmp_path) -> None:
    out = tmp_path / "r"
    with ThreadedServer(_prose_completions) as server:
        done = _combee("learn", "--endpoint", server.url, "--model", "m", "--train-split", "train[0:10]",
                       "--val-split", "val[0:5]", "--batch-size", "10", "--out", str(out), "--quiet")
    assert done.returncode == EXIT_CALLS_FAILED, done.stderr
    assert done.stderr.count("\n") == 1
    assert "step 1: 10 of 10 calls failed (malformed 10; e.g. response is not a chat completion" in done.stderr
    assert f"{out / 'final.json'} holds what was learned so far (version 0)" in done.stderr
    assert json.loads((out / "final.json").read_text())["version"] == 0
    row = json.loads((out / "ledger.jsonl").read_text())
    assert row["failures"] == {"generator": {"malformed": 10}}


def test_eval_reports_unanswered_examples_and_fails_when_most_are(tmp_path) -> None:
    out = tmp_path / "run"
    assert _combee("learn", "--train-split", "train[0:10]", "--val-split", "val[0:10]", "--batch-size", "10",
                   *FAST, "--out", str(out), "--quiet").returncode == 0
    clean = _combee("eval", "--split", "val[0:10]", "--playbook", str(out / "final.json"), *FAST)
    assert clean.returncode == 0, clean.stderr
    report = json.loads(clean.stdout)
    assert {k: report[k] for k in ("split", "learner", "examples", "answered", "unanswered", "unanswered_by_kind")} == {
        "split": "val[0:10]", "learner": "ace", "examples": 10, "answered": 10, "unanswered": 0,
        "unanswered_by_kind": {}}
    assert report["seen_rows"] == {"val[0:10]": 10}  # the run selected on these rows: said, not hidden
    assert report["interval"]["lower"] <= report["accuracy"] <= report["interval"]["upper"]
    now, clean_dir = time.time(), Path(report["run_dir"])  # the next eval starts within these seconds,
    for second in range(15):                                 # each of whose default folders holds a run
        taken = out / f"eval-val_0_10-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now + second))}"
        if taken != clean_dir:
            shutil.copytree(clean_dir, taken)
    broken = _combee("eval", "--split", "val[0:10]", "--playbook", str(out / "final.json"), *FAST,
                     "--fault-malformed", "1.0")
    assert broken.returncode == EXIT_CALLS_FAILED, broken.stderr
    report = json.loads(broken.stdout)
    assert report["run_dir"].endswith("-2")  # its second's folder was taken: a folder of its own
    assert {k: report[k] for k in ("split", "learner", "examples", "accuracy", "answered", "unanswered",
                                   "unanswered_by_kind", "interval")} == {
        "split": "val[0:10]", "learner": "ace", "examples": 10, "accuracy": 0.0, "answered": 0, "unanswered": 10,
        "unanswered_by_kind": {"malformed": 10}, "interval": None}
    assert len((Path(report["run_dir"]) / "errors.jsonl").read_text().splitlines()) == 10
    warning, error = broken.stderr.splitlines()  # the rows the run selected on are said, then the failure
    assert warning.startswith("combee eval: warning: 10 rows of val[0:10] were seen by the run")
    assert "10 of 10 examples of val[0:10] unanswered (malformed 10)" in error


def test_summary_and_ledger_count_calls_retries_and_errors_per_role_and_kind(tmp_path) -> None:
    out = tmp_path / "run"
    done = _combee("learn", "--train-split", "train[0:20]", "--val-split", "val[0:20]", "--batch-size", "10", *FAST,
                   "--fault-429", "0.1", "--fault-500", "0.1", "--fault-malformed", "0.1", "--fault-truncated", "0.05",
                   "--fault-retry-after", "0.01", "--eval-every", "0", "--out", str(out), "--quiet")  # validated once
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert json.loads(done.stdout.strip().splitlines()[-1]) == summary
    train, validation = summary["accounting"]["train"], summary["accounting"]["validation"]
    assert set(train) == {"calls", "retries", "errors", "prompt_tokens", "completion_tokens", "cached_prompt_tokens"}
    assert sum(train["cached_prompt_tokens"].values()) == 0  # the simulated endpoint caches nothing
    assert sum(train["calls"].values()) == summary["calls"]
    assert sum(train["prompt_tokens"].values()) + sum(train["completion_tokens"].values()) == summary["tokens"]
    retried = {kind for kinds in train["retries"].values() for kind in kinds}
    assert {"429", "5xx"} <= retried
    ledger = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    for role, kinds in train["errors"].items():
        for kind, n in kinds.items():
            assert sum(row["failures"].get(role, {}).get(kind, 0) for row in ledger) == n
    assert sum(len(row["errors"]) for row in ledger) == sum(n for k in train["errors"].values() for n in k.values())
    assert validation["calls"] == {"generator": 20}
    unanswered = sum(validation["errors"].get("generator", {}).values())
    assert (summary["final_val_answered"], summary["final_val_unanswered"]) == (20 - unanswered, unanswered)


def test_a_replay_cache_that_misses_everything_exits_3(tmp_path) -> None:
    cache = tmp_path / "cache.jsonl"
    cache.write_text("")
    out = tmp_path / "run"
    done = _combee("learn", "--train-split", "train[0:10]", "--val-split", "val[0:5]", "--batch-size", "10", *FAST,
                   "--cache", str(cache), "--cache-mode", "replay", "--out", str(out), "--quiet")
    assert done.returncode == EXIT_CALLS_FAILED and done.stderr.count("\n") == 1, done.stderr
    assert "step 1: 10 of 10 calls failed (replay_miss 10; e.g. " in done.stderr and str(out / "final.json") in done.stderr


def test_a_server_asking_to_come_back_in_an_hour_stops_the_run_at_once(tmp_path) -> None:
    async def limited(request: web.BaseRequest) -> web.Response:
        if request.path.endswith("/models"):
            return web.json_response({"object": "list", "data": [{"id": "m"}]})
        return web.json_response({"error": "rate limited"}, status=429, headers={"Retry-After": "3600"})

    with ThreadedServer(limited) as server:
        done = _combee("learn", "--endpoint", server.url, "--model", "m", "--train-split", "train[0:3]",
                       "--val-split", "val[0:2]", "--batch-size", "3", "--out", str(tmp_path / "r"), "--quiet",
                       timeout=60)
    assert done.returncode == EXIT_CALLS_FAILED and done.stderr.count("\n") == 1, done.stderr
    assert "step 1: 3 of 3 calls failed (429 3; e.g. HTTP 429" in done.stderr and "asked to wait 3600 s" in done.stderr
