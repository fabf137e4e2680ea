"""The start-up self-test against the real server of the ``local`` extra: a fresh install decodes,
and the server holds none of the engine's secrets.

Needs the ``local`` extra (xllamacpp and the default local model); skipped, saying so, otherwise.
"""

from __future__ import annotations

import signal
import tempfile
import time
from pathlib import Path

import aiohttp
import pytest

from combee_fast.config import LocalConfig
from combee_fast.endpoint.local import LocalServer
from tests.local_models import LOCAL_MODEL_MARKS, THREADS

pytestmark = LOCAL_MODEL_MARKS


async def test_a_fresh_install_of_the_local_server_decodes_one_token_at_start_up(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-engine-secret")
    async with LocalServer(LocalConfig(prefer_native=False, threads=THREADS)) as server:
        assert server.self_test_s is not None and server.self_test_s > 0
        assert server._process is not None
        given = Path(f"/proc/{server._process.pid}/environ").read_bytes().split(b"\0")
        assert not [entry for entry in given if entry.startswith(b"OPENAI_API_KEY=")] and given
        served = server.log_path.read_text().split("llama_host: serving", 1)[1].splitlines()[0]
    assert "AVX2 = 1" in served and "AMX" not in served, served  # the wheel's CPU-generic build
    assert not server.log_path.exists()  # a clean stop leaves no log behind


async def test_the_local_server_stops_at_once_on_sigterm_even_while_decoding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the tether sends it when its engine dies: the server must not finish its decode first."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # exited, not stopped by us: its log is kept
    async with LocalServer(LocalConfig(prefer_native=False, threads=THREADS)) as server:
        body = {"model": server.alias, "messages": [{"role": "user", "content": "Write a very long story."}],
                "max_tokens": 2000, "stream": True}
        async with aiohttp.ClientSession() as http:
            async with http.post(server.url + "/chat/completions", json=body) as response:
                await response.content.readline()  # generation has started
                process = server._process
                assert process is not None
                started = time.monotonic()
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=10)
        assert time.monotonic() - started < 3.0 and process.returncode == 0
    assert server.log_path.parent.parent == tmp_path and server.log_path.exists()
