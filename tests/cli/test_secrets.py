"""Secrets never reach the run's files or the terminal; user text cannot drive the terminal (real CLI)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import pytest
from aiohttp import web

from tests.cli.test_cli import _combee
from tests.conftest import ThreadedServer

KEY = "sk-live-0123456789abcdef"


async def _careless(request: web.BaseRequest) -> web.Response:
    """Serves model m, then answers every completion with a 400 whose body echoes the credentials."""
    if request.path.endswith("/models"):
        return web.json_response({"object": "list", "data": [{"id": "m"}]})
    echo = {"Authorization": request.headers.get("Authorization", "")}
    return web.Response(status=400, text=json.dumps({"error": "bad", "you sent": echo}), content_type="application/json")


@pytest.mark.parametrize("auth", ["url", "key"])
def test_credentials_reach_no_file_and_no_terminal(tmp_path, auth: str) -> None:
    out = tmp_path / "run"
    with ThreadedServer(_careless) as server:
        url, extra = server.url, []
        if auth == "url":
            url = url.replace("http://", "http://alice:pw-hunter2@")
        else:
            extra = ["--api-key-env", "I12_KEY"]
        done = subprocess.run(
            [sys.executable, "-m", "combee_fast.cli", "learn", "--endpoint", url, "--model", "m", *extra,
             "--train-split", "train[0:4]", "--val-split", "val[0:2]", "--batch-size", "4", "--out", str(out)],
            capture_output=True, text=True, timeout=120, env={**os.environ, "I12_KEY": KEY},
        )
    assert done.returncode == 3, done.stderr
    assert "http_400" in done.stderr
    written = "".join(p.read_bytes().decode(errors="replace") for p in out.rglob("*") if p.is_file())  # checkpoint.bin too: msgpack keeps strings as UTF-8
    assert "HTTP 400" in written and "[redacted]" in written  # the error bodies are kept...
    assert server.url in written  # ...and the endpoint...
    secrets = ["pw-hunter2", "alice:", base64.b64encode(b"alice:pw-hunter2").decode(), KEY]
    for text in (written, done.stdout, done.stderr):
        for secret in secrets:
            assert secret not in text, secret  # ...their credentials are not


def test_control_characters_of_a_data_file_are_escaped_in_the_error_line(tmp_path) -> None:
    traces = tmp_path / "traces.jsonl"
    traces.write_text(json.dumps({"id": "t0", "task": "q", "trajectory": "t", "answer": "a", "score": 1.0,
                                  "feedback": "f", "\x1b]0;pwned\x07\x1b[2J": 1}) + "\n")
    done = _combee("learn", "--task", "traces", "--data", str(traces), "--train-split", "all", "--val-split",
                   "all[0:0]", "--out", str(tmp_path / "run"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in done.stderr


def test_control_characters_of_a_playbook_are_escaped_in_the_error_line(tmp_path) -> None:
    bad = tmp_path / "bad\x1b[2J.json"
    bad.write_text('{"schema_version": 2, "bullets": [{"\x1b]0;x\x07": 1}]}')
    done = _combee("eval", "--playbook", str(bad))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr and "bad\\x1b[2J.json" in done.stderr
