"""A minimal keep-alive HTTP/1.1 client for the client's hot path: POSTs over plain ``http://``.

Why: aiohttp's ``ClientSession`` builds, per request, a request object, a timer context, header
multidicts, a payload, a response object and a stream reader; at 1,024 requests in flight that
is most of the client's CPU. Here a request is bytes made by the caller (a head pre-encoded once
per role, the length, the body) written in one call, and the response is parsed with ``bytes``
methods into :class:`Http1Response`. ``https://`` endpoints keep using aiohttp (the caller decides).

Contract of :meth:`Http1Pool.post`:
- returns one complete response (``Content-Length``, ``chunked`` or read-until-close body;
  ``gzip``/``deflate`` ``Content-Encoding`` decoded; ``1xx`` interim responses skipped);
- reads at most ``max_body`` bytes of body, counted before and after decoding
  (:class:`~combee_fast.endpoint.capped.ReplyTooLarge`); a status line, ``Content-Length``,
  chunk size or chunk end that is not what HTTP/1.1 says (a negative or non-hex chunk size, a
  chunk not followed by CRLF) or a body that does not decode is :class:`MalformedResponse`;
- raises ``TimeoutError`` when connecting plus answering takes more than ``timeout_s``, and
  :class:`Http1Error` (an ``OSError``) or another ``OSError`` when the connection fails, is
  refused, or is closed before a complete response;
- a connection is reused only after a complete response that allows keep-alive; a timed-out,
  failed or cancelled request closes its connection (the server sees it go);
- at most ``limit`` idle connections are kept; a connection the server closes while idle is
  dropped, never reused;
- with ``on_body``, a ``200`` reply's chunked body (no ``Content-Encoding``) is also handed to
  ``on_body`` a chunk at a time as it arrives; once it returns True the response is complete with
  the body read so far (``fed`` and ``cut`` set) and the connection is closed, so a server
  streaming its answer stops generating. Other bodies are read whole (``fed`` False);
- a request that fails on a reused connection before any byte of its response arrived is sent
  once more, on a new connection, within the same ``timeout_s``; the caller sees one exchange
  (:attr:`Http1Pool.resent` counts them).
  Why: a server may close a keep-alive connection at any time between requests, and its close
  can cross our next request on the wire. llama.cpp's server does so after every streamed
  (chunked) reply although its headers say ``Keep-Alive: timeout=5, max=100``, and cpp-httplib
  servers after 5 s idle; a request written into that close fails with no answer. A server that
  closed the connection between requests never read the request. From here that cannot be told
  apart from a server that read it and closed without a byte of answer, which gets it a second
  time; this is allowed because the POSTs sent here are chat completions, idempotent in effect
  (RFC 9112 §9.3.1: nothing changes on the server but the compute). A failure on a new
  connection, or after the first byte, is raised.
No redirects, cookies, proxies or ``Expect: 100-continue``: the endpoint's URL is used as given.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import NamedTuple

from combee_fast.endpoint.capped import BadEncoding, ReplyTooLarge, decoded

_MAX_HEAD = 64 * 1024
_MAX_CHUNK_LINE = 4096  # a chunk's size line, extensions included
_DIGITS = re.compile(rb"[0-9]{1,19}")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")


class Http1Error(ConnectionError):
    """The connection failed or closed before a complete response, or the response is not HTTP/1.x."""


class MalformedResponse(Http1Error):
    """The response breaks HTTP/1.1's framing (status line, length, chunks) or its encoding."""


class Headers(Mapping[str, str]):
    """Response headers keyed by lower-case name; looking one up (``[]``, ``get``, ``in``)
    ignores the name's case."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}

    def __setitem__(self, key: str, value: str) -> None:
        self._values[key.lower()] = value

    def __getitem__(self, key: str) -> str:
        return self._values[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


class Http1Response(NamedTuple):
    """``fed``: the body went to the request's ``on_body`` as it arrived; ``cut``: ``on_body``
    stopped it (the body is what was read until then)."""

    status: int
    headers: Headers
    body: bytes
    fed: bool = False
    cut: bool = False


BodyReader = Callable[[bytes], bool]
"""Takes a reply body's next piece as it arrives; True: read no more (the module doc)."""


class _Connection(asyncio.Protocol):
    """One TCP connection: at most one request at a time; parses the response as bytes arrive."""

    def __init__(self, registry: set[_Connection]) -> None:
        self._registry = registry  # the pool's open connections: this one is in it while open
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False
        self._buffer = bytearray()
        self.heard = False  # whether a byte of the current request's response has arrived
        self._waiter: asyncio.Future[Http1Response] | None = None
        self._limit: int | None = None  # most body bytes of the response awaited (None: no cap)
        self._on_body: BodyReader | None = None  # the current request's reader of its body
        self._reset()

    def _reset(self) -> None:
        self._status = 0
        self._headers: Headers | None = None
        self._length: int | None = None  # bytes of body expected (Content-Length)
        self._chunked = False
        self._chunks: list[bytes] = []
        self._chunk_bytes = 0
        self._until_close = False
        self._keep_alive = False
        self._feeding = False  # the chunks go to on_body as they arrive

    # protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._registry.add(self)

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():  # bytes nobody asked for: never reuse
            self.abort()
            return
        self.heard = True
        self._buffer += data
        try:
            self._parse()
        except (Http1Error, ReplyTooLarge) as exc:
            self._fail(exc)
        except BadEncoding as exc:
            self._fail(MalformedResponse(str(exc)))

    def eof_received(self) -> bool:
        if self._waiter is not None and not self._waiter.done() and self._until_close and self._headers is not None:
            self._finish(bytes(self._buffer), keep_alive=False)
            self._buffer.clear()
        else:
            self._fail(Http1Error("the server closed the connection before a complete response"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        self._registry.discard(self)
        self._fail(Http1Error(f"connection lost before a complete response: {exc}" if exc
                              else "the server closed the connection before a complete response"))

    # requests
    async def exchange(self, request: bytes, max_body: int | None = None,
                       on_body: BodyReader | None = None) -> Http1Response:
        """Send ``request`` (head and body) and wait for the complete response; a body over
        ``max_body`` bytes fails with :class:`ReplyTooLarge` as soon as it is announced or seen;
        ``on_body`` reads a chunked ``200`` body as it arrives (the module doc)."""
        if self.closed or self.transport is None:
            raise Http1Error("connection closed")
        self.reusable = False
        self.heard = False
        self._limit = max_body
        self._on_body = on_body
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self._waiter

    def abort(self) -> None:
        self.closed = True
        self.reusable = False
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        self.abort()

    def _finish(self, body: bytes, *, keep_alive: bool, cut: bool = False) -> None:
        headers = self._headers
        assert headers is not None
        limit = sys.maxsize if self._limit is None else self._limit
        response = Http1Response(self._status, headers, decoded(body, headers.get("content-encoding"), limit),
                                 fed=self._feeding, cut=cut)
        self.reusable = keep_alive and not self._buffer and not cut
        self._reset()
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(response)

    def _parse(self) -> None:
        buffer = self._buffer
        while self._headers is None:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > _MAX_HEAD:
                    raise Http1Error("response head larger than 64 KiB")
                return
            lines = bytes(buffer[:end]).split(b"\r\n")
            del buffer[: end + 4]
            version, _, rest = lines[0].partition(b" ")
            if not version.startswith(b"HTTP/1."):
                raise Http1Error(f"not an HTTP/1.x response: {lines[0][:60]!r}")
            if not (rest[:3].isdigit() and rest[3:4] in (b"", b" ")):
                raise MalformedResponse(f"malformed HTTP status line {lines[0][:60]!r}")
            status = int(rest[:3])
            if 100 <= status < 200:
                continue  # interim response: the real one follows
            headers = Headers()
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
            self._status, self._headers = status, headers
            connection = headers.get("connection", "").lower()
            self._keep_alive = (version == b"HTTP/1.1" and connection != "close") or connection == "keep-alive"
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self._chunked = True
                self._feeding = (self._on_body is not None and status == 200
                                 and headers.get("content-encoding", "identity").strip().lower() == "identity")
            elif (length := headers.get("content-length")) is not None:
                if not _DIGITS.fullmatch(length.encode("latin-1")):
                    raise MalformedResponse(f"malformed HTTP response: Content-Length {length[:40]!r}")
                self._length = int(length)
            elif status in (204, 304):
                self._length = 0
            else:
                self._until_close = True
        if self._limit is not None:
            self._check_size(self._limit)
        if self._chunked:
            self._parse_chunks()
        elif self._length is not None and len(buffer) >= self._length:
            body = bytes(buffer[: self._length])
            del buffer[: self._length]
            self._finish(body, keep_alive=self._keep_alive)

    def _check_size(self, limit: int) -> None:
        """Refuse a body announced, or already received, over ``limit`` bytes."""
        if self._length is not None and self._length > limit:
            raise ReplyTooLarge(f"reply of {self._length} bytes, over transport.max_reply_bytes={limit}; not read")
        received = len(self._buffer) + self._chunk_bytes  # (+ chunk framing)
        if received > limit:
            raise ReplyTooLarge(f"reply over transport.max_reply_bytes={limit} (read {received} bytes); the rest not read")

    def _parse_chunks(self) -> None:
        """Take the complete chunks in the buffer (one cut of the buffer per call, however many);
        finish early, closing the connection, when ``on_body`` says to read no more."""
        buffer = self._buffer
        taken = len(self._chunks)
        at, complete = self._take_chunks(buffer)
        del buffer[:at]
        if self._feeding and self._on_body is not None:
            for chunk in self._chunks[taken:]:
                if self._on_body(chunk):
                    buffer.clear()
                    self._finish(b"".join(self._chunks), keep_alive=False, cut=not complete)
                    self.abort()
                    return
        if complete:
            self._finish(b"".join(self._chunks), keep_alive=self._keep_alive)

    def _take_chunks(self, buffer: bytearray) -> tuple[int, bool]:
        """``(bytes taken, whether the last chunk and trailers were among them)``."""
        at = 0
        while True:
            end = buffer.find(b"\r\n", at, at + _MAX_CHUNK_LINE)
            if end < 0:
                if len(buffer) - at >= _MAX_CHUNK_LINE:
                    raise MalformedResponse(f"malformed HTTP response: a chunk size line over {_MAX_CHUNK_LINE} bytes")
                return at, False
            field = bytes(buffer[at:end]).split(b";")[0].strip()
            if not _HEX.fullmatch(field):
                raise MalformedResponse(f"malformed HTTP response: chunk size {field[:40]!r}")
            size = int(field, 16)
            if self._limit is not None and self._chunk_bytes + size > self._limit:
                raise ReplyTooLarge(f"a chunk of {size} bytes takes the reply over "
                                    f"transport.max_reply_bytes={self._limit}; not read")
            if size == 0:  # last chunk, then optional trailers, then an empty line
                trailers_end = end if buffer[end + 2 : end + 4] == b"\r\n" else buffer.find(b"\r\n\r\n", end)
                return (at, False) if trailers_end < 0 else (trailers_end + 4, True)
            if len(buffer) < end + 2 + size + 2:
                return at, False
            if buffer[end + 2 + size : end + 4 + size] != b"\r\n":
                raise MalformedResponse("malformed HTTP response: a chunk not followed by CRLF")
            self._chunks.append(bytes(buffer[end + 2 : end + 2 + size]))
            self._chunk_bytes += size
            at = end + 2 + size + 2


class Http1Pool:
    """Keep-alive connections to one ``host:port``; see the module doc for :meth:`post`."""

    def __init__(self, host: str, port: int, *, limit: int) -> None:
        self._host = host
        self._port = port
        self._limit = limit
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self.resent = 0  # requests sent once more after their reused connection closed unanswered

    async def post(self, request: bytes, timeout_s: float, max_body: int | None = None,
                   on_body: BodyReader | None = None) -> Http1Response:
        """Send ``request`` (a complete HTTP/1.1 request) on an idle or new connection, and once
        more on a new one if the idle one fails before any byte of the response (module doc); a
        reply body over ``max_body`` bytes raises :class:`ReplyTooLarge` (the connection is
        closed); ``on_body`` reads a chunked ``200`` body as it arrives (module doc)."""
        idle = None
        while self._idle:
            candidate = self._idle.pop()
            if not candidate.closed:
                idle = candidate
                break
        connection = idle
        try:
            async with asyncio.timeout(timeout_s):
                try:
                    if connection is None:
                        connection = await self._connect()
                    response = await connection.exchange(request, max_body, on_body)
                except Http1Error:
                    if idle is None or idle.heard:  # a new connection failed, or the reply had begun
                        raise
                    self.resent += 1
                    connection = await self._connect()  # closed by the server as the request went out (module doc)
                    response = await connection.exchange(request, max_body, on_body)
        except BaseException:
            if connection is not None:
                connection.abort()
            raise
        if connection.reusable and not connection.closed and len(self._idle) < self._limit:
            self._idle.append(connection)
        else:
            connection.abort()
        return response

    async def _connect(self) -> _Connection:
        """A new connection to the pool's ``host:port`` (``OSError`` when it cannot be made)."""
        _, connection = await asyncio.get_running_loop().create_connection(
            lambda: _Connection(self._open), self._host, self._port)
        return connection

    def close(self) -> None:
        """Close every connection, idle or busy (busy requests fail with :class:`Http1Error`)."""
        for connection in (*self._open, *self._idle):
            connection.abort()
        self._idle.clear()
