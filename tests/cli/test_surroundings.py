"""Every failure of the surroundings is one line naming what and where, the right exit code, and
nothing lost (a real ``combee`` process against a misbehaving server of our own, tests/hostile.py):
bodies that break HTTP or inflate without end, a trickle, header values that are not numbers,
a server echoing credentials in any encoding or bidi overrides, GEPA whose every call fails,
data files that are devices or FIFOs, a full disk, ports that do not exist."""

from __future__ import annotations

import base64
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from combee_fast.errors import EXIT_CALLS_FAILED, EXIT_STORAGE, EXIT_USAGE
from tests.hostile import (HostileServer, Request, completion_body, gzip_bomb, head, raw, respond,
                           trickle)

SMALL = ["--task", "formula", "--method", "combee", "--batch-size", "8", "--train-split", "train[0:8]",
         "--val-split", "val[0:4]", "--quiet", "--response-format", "none"]


def _combee(*args: str, timeout: float = 180, env: dict[str, str] | None = None,
            preexec_fn=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, preexec_fn=preexec_fn)


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr.strip()


CHUNKED = head(200, [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")])


@pytest.mark.parametrize(("behaviour", "code", "said"), [
    (raw(CHUNKED + b"-6\r\nabcdef\r\n0\r\n\r\n"), EXIT_CALLS_FAILED, "malformed"),
    (gzip_bomb(256 * 2**20), EXIT_CALLS_FAILED, "too_large"),
    (respond(429, '{"error": "busy"}', [("Retry-After", "nan")]), EXIT_CALLS_FAILED, "429"),
    (respond(429, '{"error": "busy"}', [("retry-after-ms", "NaN")]), EXIT_CALLS_FAILED, "429"),
    (respond(503, '{"error": "busy"}', [("Retry-After", "-3")]), EXIT_CALLS_FAILED, "5xx"),
    (respond(503, '{"error": "busy"}', [("Retry-After", "Mon, 01 Jan 1990 00:00:00 GMT")]), EXIT_CALLS_FAILED, "5xx"),
    (respond(503, '{"error": "busy"}', [("Retry-After", "inf")]), EXIT_CALLS_FAILED, "asked to wait inf s"),
])
def test_a_hostile_reply_is_one_line_and_exit_3(tmp_path: Path, behaviour, code: int, said: str) -> None:
    started = time.monotonic()
    with HostileServer(behaviour) as server:
        done = _combee("learn", *SMALL, "--endpoint", server.url, "--model", "m", "--out", str(tmp_path / "run"))
    line = _one_line(done)
    assert done.returncode == code and said in line, line
    assert time.monotonic() - started < 120
    assert (tmp_path / "run" / "errors.jsonl").read_bytes().count(b"\n") >= 8  # every failure kept


def test_a_trickling_server_is_given_up_within_the_timeout_per_call(tmp_path: Path) -> None:
    with HostileServer(trickle(200, completion_body(), every_s=0.2)) as server:
        started = time.monotonic()
        done = _combee("learn", *SMALL, "--endpoint", server.url, "--model", "m", "--timeout", "1",
                       "--out", str(tmp_path / "run"))
        elapsed = time.monotonic() - started
    line = _one_line(done)
    assert done.returncode == EXIT_USAGE and "every call of step 1 failed to reach its endpoint" in line, line
    assert elapsed < 30  # a step of calls, each ended at its 1 s timeout (not 5 attempts of 1 s each)


def test_the_bidi_override_of_a_server_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    body = '{"e": "\u202egnp.exe\u202c\u200b\x1b[2J"}'  # raw: a bidi override, a zero-width space, ESC
    with HostileServer(respond(400, body)) as server:
        done = _combee("learn", *SMALL, "--endpoint", server.url, "--model", "m", "--out", str(tmp_path / "run"))
    line = _one_line(done)
    assert done.returncode == EXIT_CALLS_FAILED
    assert "\\u202egnp.exe\\u202c\\u200b\\x1b[2J" in line, line
    assert not any(ord(c) in (0x202E, 0x202C, 0x200B, 0x1B) for c in done.stderr)


def _echo_credentials(form: str):
    """400s whose body echoes what the request authenticated with, decoded, in ``form``."""

    async def behave(request: Request, writer) -> None:
        auth = request.headers.get("authorization", "")
        scheme, _, value = auth.partition(" ")
        secret = base64.b64decode(value).decode().partition(":")[2] if scheme == "Basic" else value
        echoed = {"raw": secret, "php": json.dumps(secret)[1:-1].replace("/", "\\/"),
                  "u-escaped": "".join(f"\\u{ord(c):04x}" for c in secret)}[form]
        body = '{"error": "denied for ' + echoed + '", "header": "' + auth.replace("/", "\\/") + '"}'
        await respond(400, body)(request, writer)

    return behave


@pytest.mark.parametrize("form", ["raw", "php", "u-escaped"])
@pytest.mark.parametrize("auth", ["percent-encoded password", "key with slashes"])
def test_credentials_echoed_in_any_encoding_reach_no_file_and_no_terminal(tmp_path: Path, auth: str,
                                                                          form: str) -> None:
    password, key = "p-w/x@y:z", "sk-live/0123456789/abcdef"
    out = tmp_path / "run"
    with HostileServer(_echo_credentials(form)) as server:
        if auth == "percent-encoded password":
            url, extra = server.url.replace("http://", "http://alice:p%2Dw%2Fx%40y%3Az@"), []
        else:
            url, extra = server.url, ["--api-key-env", "I25_KEY"]
        done = _combee("learn", *SMALL[:-2], "--endpoint", url, "--model", "m", *extra, "--out", str(out),
                       env={"I25_KEY": key})
    assert done.returncode == EXIT_CALLS_FAILED, done.stderr
    written = {str(p.relative_to(out)): p.read_bytes().decode(errors="replace") for p in out.rglob("*") if p.is_file()}
    assert "denied for" in written["errors.jsonl"] and "[redacted]" in written["errors.jsonl"]
    assert "denied for" in written["ledger.jsonl"] and "denied for" in written["capabilities.json"]
    secret = password if auth == "percent-encoded password" else key
    forms = {secret, json.dumps(secret)[1:-1].replace("/", "\\/"), secret.replace("/", "\\/"),
             "".join(f"\\u{ord(c):04x}" for c in secret), "p%2Dw%2Fx%40y%3Az",
             base64.b64encode(f"alice:{password}".encode()).decode()}
    for name, text in [*written.items(), ("stdout", done.stdout), ("stderr", done.stderr)]:
        for leaked in forms:
            assert leaked not in text, (name, leaked)


@pytest.mark.parametrize("method", ["gepa", "combee-gepa"])
def test_gepa_whose_every_call_fails_exits_3_with_every_failure_recorded(tmp_path: Path, method: str) -> None:
    out = tmp_path / "run"
    with HostileServer(respond(500, '{"error": "boom"}')) as server:
        done = _combee("learn", "--method", method, "--train-split", "train[0:20]", "--val-split", "val[0:10]",
                       "--max-metric-calls", "200", "--quiet", "--endpoint", server.url, "--model", "m",
                       "--out", str(out))
    line = _one_line(done)
    assert done.returncode == EXIT_CALLS_FAILED and "calls failed (5xx" in line, line
    failures = [json.loads(row) for row in (out / "errors.jsonl").read_bytes().splitlines()]
    calls = json.loads((out / "calls.json").read_bytes())
    assert failures and {f["role"] for f in failures} == {"gepa_solver"} and all(f["label"] == "5xx" for f in failures)
    assert calls["gepa_solver"] == len(failures) and calls["failed"] == len(failures)


@pytest.mark.parametrize("data", ["/dev/zero", "fifo", "folder"])
def test_a_data_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path, data: str) -> None:
    path = {"/dev/zero": "/dev/zero", "fifo": str(tmp_path / "fifo"), "folder": str(tmp_path)}[data]
    if data == "fifo":
        os.mkfifo(path)
    started = time.monotonic()
    done = _combee("learn", "--task", "jsonl", "--data", path, "--task-option", "input_field=q", "--train-split",
                   "all", "--out", str(tmp_path / "run"), timeout=60)
    line = _one_line(done)
    assert done.returncode == EXIT_USAGE and f"{path}: cannot read file: " in line and "not a regular file" in line
    assert time.monotonic() - started < 30 and not (tmp_path / "run").exists()


@pytest.mark.parametrize("port", ["99999", "-1", "65536", "http"])
def test_sim_server_refuses_a_port_that_does_not_exist(port: str) -> None:
    done = _combee("sim-server", "--port", port, timeout=60)
    line = _one_line(done)
    assert done.returncode == EXIT_USAGE and "must be a TCP port, 1-65535" in line and repr(port) in line


def _file_size_limit(limit: int):
    def limit_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_files


def test_a_file_that_cannot_be_written_mid_run_is_one_line_and_the_run_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run = ["learn", "--task", "formula", "--batch-size", "10", "--train-split", "train[0:60]", "--val-split",
           "val[0:10]", "--quiet", "--out", str(out)]
    done = _combee(*run, preexec_fn=_file_size_limit(25_000))  # the checkpoint outgrows it after a few steps
    line = _one_line(done)
    assert done.returncode == EXIT_STORAGE and line.startswith("combee learn: error: cannot write "), line
    assert "File too large" in line
    resumed = _combee("learn", "--resume", str(out), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((out / "summary.json").read_bytes())["samples"] == 60


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True).returncode == 0


@pytest.mark.parametrize("size", ["8k", "64k"])
def test_a_full_disk_at_start_up_or_mid_run_is_one_line(tmp_path: Path, size: str) -> None:
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, size):
        pytest.skip("mounting a small tmpfs needs root (the RLIMIT_FSIZE test covers the unprivileged case)")
    try:
        done = _combee("learn", "--task", "formula", "--batch-size", "10", "--train-split", "train[0:60]",
                       "--val-split", "val[0:10]", "--quiet", "--out", str(disk / "run"))
    finally:
        subprocess.run(["umount", str(disk)], check=True)
    line = _one_line(done)
    assert done.returncode in (EXIT_STORAGE, EXIT_USAGE), line
    assert "No space left on device" in line and str(disk) in line, line


def test_a_token_budget_that_holds_no_lesson_is_a_run_that_learned_nothing(tmp_path: Path) -> None:
    done = _combee("learn", "--task", "formula", "--batch-size", "20", "--train-split", "train[0:40]", "--val-split",
                   "val[0:10]", "--token-budget", "1", "--quiet", "--out", str(tmp_path / "run"))
    line = _one_line(done)
    assert done.returncode == EXIT_CALLS_FAILED and "the run learned nothing" in line, line
    assert "rejected" in line and "token_budget=1 may hold none of them" in line
    assert "rejected (does not fit token_budget 1 even alone " in line, line  # why, not only how many
    rows = [json.loads(row) for row in (tmp_path / "run" / "ledger.jsonl").read_text().splitlines()]
    assert sum(sum(row["rejections"].values()) for row in rows) == sum(row["rejected"] for row in rows) > 0
    assert json.loads((tmp_path / "run" / "final.json").read_bytes())["bullets"] == []
