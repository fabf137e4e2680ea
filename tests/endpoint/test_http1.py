"""The keep-alive HTTP/1.1 pool against a real aiohttp server on loopback: body framings,
encodings, connection reuse and closing, timeouts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from combee_fast.endpoint.http1 import Headers, Http1Error, Http1Pool


class _Server:
    def __init__(self) -> None:
        self.connections = 0
        self.port = 0


@pytest.fixture
async def server() -> AsyncIterator[_Server]:
    state = _Server()

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        body = await request.read()
        path = request.path
        if path == "/chunked":
            response = web.StreamResponse(headers={"X-Kind": "chunked"})
            response.enable_chunked_encoding()
            await response.prepare(request)
            for part in (b"he", b"llo ", body):
                await response.write(part)
            await response.write_eof()
            return response
        if path == "/gzip":
            response = web.Response(body=body * 50)
            response.enable_compression(web.ContentCoding.gzip)
            return response
        if path == "/close":
            return web.Response(body=b"bye", headers={"Connection": "close"})
        if path == "/drop":
            assert request.transport is not None
            request.transport.close()
            await asyncio.sleep(1)
        if path == "/slow":
            await asyncio.sleep(5)
        return web.Response(body=body, status=201, headers={"Retry-After": "3"})

    def on_connection(*_: object) -> None:
        state.connections += 1

    low = web.Server(handle, keepalive_timeout=0.2)  # idle connections closed by the server
    loop = asyncio.get_running_loop()

    def factory() -> asyncio.Protocol:
        on_connection()
        return low()

    srv = await loop.create_server(factory, "127.0.0.1", 0)
    state.port = srv.sockets[0].getsockname()[1]
    yield state
    srv.close()
    await low.shutdown(0.1)


def _request(path: str, body: bytes = b"") -> bytes:
    return b"POST %b HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%b" % (path.encode(), len(body), body)


async def test_content_length_bodies_reuse_one_connection(server: _Server) -> None:
    pool = Http1Pool("127.0.0.1", server.port, limit=4)
    for i in range(5):
        response = await pool.post(_request("/echo", b"ping %d" % i), 5.0)
        assert response.status == 201 and response.body == b"ping %d" % i
    assert response.headers.get("retry-after") == "3" and response.headers.get("Retry-After") == "3"
    assert "RETRY-AFTER" in response.headers and isinstance(response.headers, Headers)
    assert server.connections == 1
    pool.close()


async def test_chunked_and_gzip_bodies_are_decoded(server: _Server) -> None:
    pool = Http1Pool("127.0.0.1", server.port, limit=4)
    chunked = await pool.post(_request("/chunked", b"world"), 5.0)
    assert chunked.body == b"hello world" and chunked.headers.get("x-kind") == "chunked"
    zipped = await pool.post(_request("/gzip", b"abc"), 5.0)
    assert zipped.body == b"abc" * 50 and zipped.headers.get("content-encoding") == "gzip"
    assert server.connections == 1  # both kept the connection alive
    pool.close()


async def test_connection_close_is_honoured_and_concurrent_requests_use_their_own(server: _Server) -> None:
    pool = Http1Pool("127.0.0.1", server.port, limit=8)
    assert (await pool.post(_request("/close"), 5.0)).body == b"bye"
    assert (await pool.post(_request("/echo", b"again"), 5.0)).body == b"again"
    assert server.connections == 2  # the closed one was not reused
    replies = await asyncio.gather(*(pool.post(_request("/echo", b"%d" % i), 5.0) for i in range(8)))
    assert [r.body for r in replies] == [b"%d" % i for i in range(8)]
    pool.close()


async def test_a_dropped_connection_and_a_timeout_raise_and_close(server: _Server) -> None:
    pool = Http1Pool("127.0.0.1", server.port, limit=4)
    with pytest.raises(Http1Error):
        await pool.post(_request("/drop"), 5.0)
    with pytest.raises(TimeoutError):
        await pool.post(_request("/slow"), 0.1)
    assert (await pool.post(_request("/echo", b"ok"), 5.0)).body == b"ok"  # a fresh connection
    pool.close()


async def test_a_refused_connection_is_an_os_error() -> None:
    probe = await asyncio.get_running_loop().create_server(asyncio.Protocol, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    with pytest.raises(OSError):
        await Http1Pool("127.0.0.1", port, limit=1).post(_request("/"), 5.0)


async def test_a_connection_the_server_closed_while_idle_is_not_reused(server: _Server) -> None:
    pool = Http1Pool("127.0.0.1", server.port, limit=4)
    assert (await pool.post(_request("/echo", b"one"), 5.0)).body == b"one"
    await asyncio.sleep(0.5)  # past the server's keep-alive timeout: it closes the idle connection
    assert (await pool.post(_request("/echo", b"two"), 5.0)).body == b"two"
    assert server.connections == 2
    pool.close()
