"""A ``--local`` server that dies is reported in one line naming its signal and ``server.log``.

The server here is a stand-in ``llama-server`` put first on ``PATH`` (``--local`` prefers one
there): a real process serving real HTTP on loopback that answers ``GET /v1/models`` and kills
itself with SIGSEGV on a chosen chat request, as a llama.cpp built for another CPU does on its
first decode.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path


STAND_IN = '''#!{python}
"""A llama-server that answers /v1/models and dies of SIGSEGV on chat request number DIE_ON."""
import json, os, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

port = int(sys.argv[sys.argv.index("--port") + 1])
alias = sys.argv[sys.argv.index("--alias") + 1]  # the model name it answers to, as llama-server's --alias
die_on = int(os.environ["COMBEE_TEST_DIE_ON"])  # COMBEE_*: a child server keeps only the allow-listed variables
chats = 0


class Handler(BaseHTTPRequestHandler):
    def _reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._reply({{"object": "list", "data": [{{"id": alias, "object": "model"}}]}})

    def do_POST(self):
        global chats
        self.rfile.read(int(self.headers.get("content-length", 0)))
        chats += 1
        if chats >= die_on:
            print("ggml: decoding the first batch", flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)
        self._reply({{"id": "c", "object": "chat.completion", "model": alias,
                     "choices": [{{"index": 0, "finish_reason": "length",
                                  "message": {{"role": "assistant", "content": "OK"}}}}],
                     "usage": {{"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}}})

    def log_message(self, *args):
        pass


print("stand-in llama-server listening", flush=True)
HTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''


def _stand_in(tmp_path: Path) -> dict[str, str]:
    """A ``PATH`` whose first ``llama-server`` is the stand-in; the environment to run it with
    (its temporary files, the dead server's kept log among them, under ``tmp_path``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "llama-server"
    script.write_text(STAND_IN.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "TMPDIR": str(tmp_path)}


def _learn(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # a GGUF path is all --local checks of the model before the server loads it: any file will do
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    return subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", "learn", "--local", "--local-model", str(model),
         "--train-split", "train[0:2]", "--val-split", "val[0:1]", "--batch-size", "2",
         "--out", str(tmp_path / "run"), "--quiet"],
        capture_output=True, text=True, timeout=300, env=env)


def _error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, done.stderr
    return errors[0]


def test_a_server_that_dies_on_its_first_decode_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = _stand_in(tmp_path)
    env["COMBEE_TEST_DIE_ON"] = "1"  # the start-up self-test is the first chat request
    line = _error_line(_learn(tmp_path, env))
    assert "died of SIGSEGV (signal 11) on its start-up decode of one token" in line, line
    log = Path(line.split("its log: ")[1].split(" ")[0])
    assert log.name == "server.log" and "decoding the first batch" in log.read_text(), line
    assert "rebuild that llama-server for this CPU, or take it off PATH" in line  # the remedy
    assert not (tmp_path / "run").exists()  # nothing was learned: no run folder


def test_a_server_that_dies_after_its_self_test_is_named_instead_of_connection_errors(tmp_path: Path) -> None:
    env = _stand_in(tmp_path)
    env["COMBEE_TEST_DIE_ON"] = "2"  # the self-test passes; the next request (the endpoint probe) kills it
    line = _error_line(_learn(tmp_path, env))
    assert "died of SIGSEGV (signal 11) after its start-up self-test" in line, line
    assert "server.log" in line and "Connect" not in line, line
