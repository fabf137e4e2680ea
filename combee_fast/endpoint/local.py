"""A local llama.cpp server started for a run: ``combee learn --local [NAME]`` / ``combee eval --local``.

The model is the named one (:mod:`.models`; by default
:attr:`~combee_fast.config.LocalConfig.name`, the one the ``local`` extra installs), unless
``--local-model`` names another GGUF file. The server is llama.cpp's native C++ server, either a
``llama-server`` on ``PATH`` (preferred: one built for this machine) or the one the ``xllamacpp``
wheel of the ``local`` extra hosts (:mod:`.llama_host`: prebuilt for any x86-64 CPU with AVX2).
Both use the chat template stored in the GGUF, decode ``config.slots`` requests at once (continuous
batching), stop generating a streamed request given up on, and count their work on ``GET /metrics``
(:mod:`.server_work`).

:class:`LocalServer` picks a free loopback port, starts the server with ``threads`` threads,
waits until ``GET /v1/models`` answers, then decodes one token (the start-up self-test): a
server that crashes on its first decode is found there, before any work, and reported in one
line naming the signal and its ``server.log`` (:class:`~combee_fast.errors.LocalServerDied`),
as is a server that dies during the run. It stops the server on exit; a server whose engine is
killed dies with it (:mod:`.tether`). Its output goes to :attr:`LocalServer.log_path`, removed
after a clean stop and kept when the server died.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import aiohttp

from combee_fast.config import LocalConfig
from combee_fast.endpoint.models import local_model, model_file
from combee_fast.endpoint.tether import tethered
from combee_fast.engine.child_variables import child_variables
from combee_fast.errors import ConfigError, EndpointUnreachable, LocalServerDied

REMEDY = {"native": "rebuild that llama-server for this CPU, or take it off PATH to use the local extra's server",
          "xllamacpp": "reinstall the local extra (pip install --force-reinstall -e '.[local]'), or put a "
                       "llama-server built for this machine on PATH"}
"""What to do about a local server that crashes (a native ``llama-server``, or xllamacpp's), in
the line that says so."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def server_command(model: Path, alias: str, port: int, config: LocalConfig, *, native: str | None) -> list[str]:
    """The command line of the server answering to the model name ``alias``: a native
    ``llama-server`` (path ``native``), else the one ``xllamacpp`` hosts (:mod:`.llama_host`)."""
    threads = str(config.threads or max(1, os.cpu_count() or 1))
    if native is not None:
        return [native, "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-t", threads,
                "-c", str(config.context * config.slots), "-np", str(config.slots), "--alias", alias, "--metrics"]
    if importlib.util.find_spec("xllamacpp") is None:
        raise ConfigError("--local needs a llama.cpp server: pip install -e '.[local]' (xllamacpp), "
                          "or put llama-server on PATH")
    # -P: the working folder is not on its import path (an xllamacpp.py there would run in the server)
    return [sys.executable, "-P", "-m", "combee_fast.endpoint.llama_host", "--model", str(model), "--port", str(port),
            "--threads", threads, "--context", str(config.context), "--slots", str(config.slots),
            "--alias", alias]


def exit_cause(returncode: int) -> str:
    """How a process ended, from its return code: ``SIGSEGV (signal 11)`` or ``status 1``."""
    if returncode < 0:
        try:
            return f"{signal.Signals(-returncode).name} (signal {-returncode})"
        except ValueError:
            return f"signal {-returncode}"
    return f"status {returncode}"


class LocalServer:
    """``async with LocalServer(config) as server:`` a llama.cpp server on ``server.url`` that has
    decoded one token (the start-up self-test, in :attr:`self_test_s` seconds).

    Entering raises :class:`~combee_fast.errors.LocalServerDied` when the server exits before it
    is healthy or on the self-test, and :class:`EndpointUnreachable` when it is not healthy within
    ``config.start_timeout_s`` or its self-test decodes nothing. Leaving with an exception while
    the server has died raises :class:`~combee_fast.errors.LocalServerDied` in its place (the
    calls that failed only saw a closed connection). On exit the server gets SIGTERM, then SIGKILL.
    """

    def __init__(self, config: LocalConfig) -> None:
        self.config = config
        named = local_model(config.name)
        self.model = Path(config.model) if config.model else model_file(named)
        if not self.model.is_file():
            raise ConfigError(f"--local-model {self.model}: no such file")
        self.alias = self.model.stem if config.model else named.alias  # the model name it answers to
        self.native = shutil.which("llama-server") if config.prefer_native else None
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.command = server_command(self.model, self.alias, self.port, config, native=self.native)
        self.log_path = Path(tempfile.mkdtemp(prefix="combee-local-")) / "server.log"
        self._process: subprocess.Popen[bytes] | None = None
        self.started_s: float | None = None
        self.self_test_s: float | None = None

    @property
    def kind(self) -> str:
        return "llama-server" if self.native else "xllamacpp llama.cpp server"

    async def __aenter__(self) -> LocalServer:
        started = time.perf_counter()
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(tethered(self.command), stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True, env=child_variables())
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.config.start_timeout_s)) as http:
                await self._wait_healthy(http)
                tested = time.perf_counter()
                await self._self_test(http)
                self.self_test_s = time.perf_counter() - tested
        except BaseException:
            self.stop()
            raise
        self.started_s = time.perf_counter() - started
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> None:
        died = self.exit_status()
        self.stop()
        if died is None:
            self._remove_log()
        elif isinstance(exc, Exception) and not isinstance(exc, LocalServerDied):
            raise LocalServerDied(self.death_line(died, "after its start-up self-test")) from exc

    def exit_status(self) -> int | None:
        """The server's return code if it has exited, else None (running, or stopped by us)."""
        return None if self._process is None else self._process.poll()

    def death_line(self, returncode: int, when: str) -> str:
        """One line: the server died (of which signal, or with which status), when, where its log is."""
        return (f"the local {self.kind} died of {exit_cause(returncode)} {when}; its log: {self.log_path} "
                f"({self.log_tail(1)}); {REMEDY['native' if self.native else 'xllamacpp']}")

    async def _wait_healthy(self, http: aiohttp.ClientSession) -> None:
        deadline = time.monotonic() + self.config.start_timeout_s
        while time.monotonic() < deadline:
            if (status := self.exit_status()) is not None:
                raise LocalServerDied(self.death_line(status, "before it was healthy"))
            try:
                async with http.get(self.url + "/models", timeout=aiohttp.ClientTimeout(total=5)) as response:
                    if response.status == 200:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(0.5)
        raise EndpointUnreachable(f"the local {self.kind} was not healthy within {self.config.start_timeout_s:g} s; "
                                  f"its log: {self.log_path} ({self.log_tail()})")

    async def _self_test(self, http: aiohttp.ClientSession) -> None:
        """Decode one token; a server that dies doing so (a build for another CPU) is reported here."""
        body = {"model": self.alias, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1,
                "temperature": 0.0}
        problem = None
        try:
            async with http.post(self.url + "/chat/completions", json=body) as response:
                reply = await response.json(content_type=None)
                usage = reply.get("usage") if isinstance(reply, dict) else None
                tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
                if response.status != 200 or not isinstance(tokens, int) or tokens < 1:
                    problem = f"HTTP {response.status}, {str(reply)[:200]}"
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        if problem is None:
            return
        if (status := await self._exited_within(5.0)) is not None:
            raise LocalServerDied(self.death_line(status, "on its start-up decode of one token"))
        raise EndpointUnreachable(f"the local {self.kind} did not decode one token at start-up ({problem}); its log: "
                                  f"{self.log_path} ({self.log_tail(1)})")

    async def _exited_within(self, seconds: float) -> int | None:
        """The return code once the server has exited, waiting up to ``seconds`` (None: still running)."""
        deadline = time.monotonic() + seconds
        while (status := self.exit_status()) is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return status

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return " | ".join(text[-lines:]) or "empty log"

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s); idempotent."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _remove_log(self) -> None:
        shutil.rmtree(self.log_path.parent, ignore_errors=True)
