"""A blocking chat callable for libraries whose loops are synchronous (the PyPI ``gepa`` package's
``task_lm`` and ``reflection_lm``, our GEPA interop strategy's ``lm``).

:class:`BlockingChat` takes a prompt (a string: one user message) or a list of chat messages
(``{"role", "content"}`` dicts), POSTs one ``/chat/completions`` request and returns the reply's
text. It is thread-safe and counts what it sent: calls, the simulated seconds the server reported
(``X-Combee-Sim-Latency``; 0 from a real server) and, for a single-threaded caller, the serial
critical path. No role header is sent unless ``role`` is given, so a router on the simulated
server treats the caller as a peer. A failed request raises :class:`EndpointError` (the caller's
loop decides what a failure means); there are no retries. ``timeout_s`` defaults to the
transport's (:class:`~combee_fast.config.TransportConfig`), and no reply is read past the
transport's ``max_reply_bytes`` (counted after decoding), a too large one is an
:class:`EndpointError`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import msgspec

from combee_fast.config import TransportConfig
from combee_fast.endpoint.wire import ROLE_HEADER, SIM_LATENCY_HEADER
from combee_fast.errors import EndpointError


class BlockingChat:
    """``chat(prompt_or_messages) -> str`` against ``base_url`` (ending in ``/v1``)."""

    def __init__(
        self, base_url: str, model: str, *, max_tokens: int | None = None, temperature: float = 0.0,
        role: str | None = None, timeout_s: float | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.headers = {ROLE_HEADER: role} if role else {}
        transport = TransportConfig()
        self._client = httpx.Client(timeout=timeout_s if timeout_s is not None else transport.timeout_s)
        self._limit = transport.max_reply_bytes
        self._lock = threading.Lock()
        self._in_flight = 0
        self.calls = 0
        self.sim_seconds = 0.0
        self.peak_in_flight = 0

    def __call__(self, prompt: str | Sequence[Mapping[str, Any]], json_schema: Mapping[str, Any] | None = None) -> str:
        """The reply's text; with ``json_schema``, the request asks for JSON of that schema
        (``response_format`` ``json_schema``)."""
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [
            {"role": str(m["role"]), "content": str(m["content"])} for m in prompt
        ]
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if json_schema is not None:
            body["response_format"] = {
                "type": "json_schema", "json_schema": {"name": "reply", "schema": dict(json_schema)},
            }
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        try:
            status, data, latency = self._post(body)
        except httpx.HTTPError as exc:
            raise EndpointError(f"{self.url}: {exc}") from exc
        finally:
            with self._lock:
                self._in_flight -= 1
        if status != 200:
            raise EndpointError(f"{self.url}: HTTP {status}: {data[:200].decode(errors='replace')}")
        with self._lock:
            self.calls += 1
            self.sim_seconds += latency
        try:
            return str(msgspec.json.decode(data)["choices"][0]["message"]["content"] or "")
        except (msgspec.MsgspecError, KeyError, IndexError, TypeError) as exc:
            raise EndpointError(f"{self.url}: not a chat completion: {exc}") from None

    def _post(self, body: dict[str, Any]) -> tuple[int, bytes, float]:
        """``(status, decoded body of at most the cap, simulated seconds reported)`` of one POST."""
        with self._client.stream("POST", self.url, json=body, headers=self.headers) as response:
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > self._limit:
                    raise EndpointError(f"{self.url}: reply over transport.max_reply_bytes={self._limit}; not read")
                chunks.append(chunk)
            try:
                latency = float(response.headers.get(SIM_LATENCY_HEADER, "0") or 0)
            except ValueError:
                latency = 0.0
            return response.status_code, b"".join(chunks), latency if math.isfinite(latency) and latency >= 0 else 0.0

    def close(self) -> None:
        self._client.close()
