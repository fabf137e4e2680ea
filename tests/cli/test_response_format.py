"""A server that rejects json_schema the way llama-cpp-python does: the run picks the next form by
itself and completes (real processes: ``combee sim-server`` and ``combee learn``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture
def rejecting_server() -> Iterator[str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0", "--world", "formula",
         "--time-scale", "0.0001", "--reject-json-schema"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = server.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("listening on "), line
        yield line.split()[-1]
    finally:
        server.terminate()
        server.wait(timeout=30)


def _learn(url: str, out, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", "learn", "--endpoint", url, "--model", "sim",
         "--train-split", "train[0:20]", "--val-split", "val[0:10]", "--batch-size", "10",
         "--out", str(out), "--quiet", *extra],
        capture_output=True, text=True, timeout=240,
    )


def test_auto_detects_json_object_with_schema_and_the_run_completes(rejecting_server: str, tmp_path) -> None:
    done = _learn(rejecting_server, tmp_path / "run")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["bullets"] > 0 and summary["final_val_answered"] == 10
    assert not summary["accounting"]["train"]["errors"]
    (caps,) = json.loads((tmp_path / "run" / "capabilities.json").read_text())
    assert caps["form"] == "json_object_schema" and caps["probed"] is True
    assert caps["tried"]["json_schema"].startswith("HTTP 500")
    assert sorted(caps["roles"]) == ["curator", "generator", "reducer", "reflector"]


def test_a_forced_json_schema_falls_back_once_during_the_run_and_completes(rejecting_server: str, tmp_path) -> None:
    done = _learn(rejecting_server, tmp_path / "run", "--response-format", "json_schema")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("rejected response_format form 'json_schema'") == 1
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["bullets"] > 0 and not summary["accounting"]["train"]["errors"]
    (caps,) = json.loads((tmp_path / "run" / "capabilities.json").read_text())
    assert caps["form"] == "json_object_schema" and caps["fallbacks"] == ["json_schema"]


def test_local_with_a_missing_model_file_or_with_an_endpoint_is_one_line_and_exit_2(tmp_path) -> None:
    for extra in (("--local-model", str(tmp_path / "missing.gguf")), ("--endpoint", "http://127.0.0.1:9/v1")):
        done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", "--local", *extra,
                               "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().count("\n") == 0 and "--local" in done.stderr
        assert not (tmp_path / "run").exists()
