"""Reading a reply body without letting its size decide the process's memory.

A body announced (``Content-Length``) or found while streaming to be larger than the limit is not
read further: :class:`ReplyTooLarge`. The limit counts the bytes the body *decodes* to as well:
a ``gzip`` or ``deflate`` body is inflated a bounded piece at a time and given up on as soon as it
passes the limit (a small compressed reply inflating to gigabytes is refused after ``limit``
bytes of output, never held). The connection is then closed rather than reused (aiohttp closes a
connection released with its body unread). aiohttp sessions of the client do not decompress
(``auto_decompress=False``): every body is decoded here, under the limit.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

CHUNK_BYTES = 64 * 1024
"""Bytes read (or inflated) at a time from a body of unknown or large size."""

ACCEPT_ENCODING = "gzip, deflate"
"""The content encodings :func:`decoded` reads (what requests tell servers they accept)."""


class ReplyTooLarge(Exception):
    """A reply body over the limit: the message names the limit and the size seen."""


class BadEncoding(Exception):
    """A body that does not decode with its ``Content-Encoding`` (or an encoding not offered)."""


async def read_capped(response: Any, limit: int) -> bytes:
    """The body of ``response`` (an ``aiohttp.ClientResponse`` of a session that does not
    decompress), decoded, at most ``limit`` bytes before and after decoding; else
    :class:`ReplyTooLarge` (:class:`BadEncoding` for a body that does not decode)."""
    announced = response.content_length
    if announced is not None and announced > limit:
        raise ReplyTooLarge(f"reply of {announced} bytes, over transport.max_reply_bytes={limit}; not read")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(CHUNK_BYTES):
        size += len(chunk)
        if size > limit:
            raise ReplyTooLarge(f"reply over transport.max_reply_bytes={limit} (read {size} bytes); the rest not read")
        chunks.append(chunk)
    return decoded(b"".join(chunks), response.headers.get("Content-Encoding"), limit)


async def read_streamed(response: Any, limit: int, on_body: Callable[[bytes], bool]) -> bytes:
    """The body of ``response`` (as :func:`read_capped`, of a body with no ``Content-Encoding``),
    each piece also handed to ``on_body`` as it arrives; once ``on_body`` returns True nothing more
    is read and the connection is closed (aiohttp closes one released with its body unread)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise ReplyTooLarge(f"reply over transport.max_reply_bytes={limit} (read {size} bytes); the rest not read")
        chunks.append(chunk)
        if on_body(chunk):
            response.close()
            break
    return b"".join(chunks)


def decoded(body: bytes, encoding: str | None, limit: int) -> bytes:
    """``body`` decoded from its ``Content-Encoding`` (``gzip``, ``deflate`` or none), at most
    ``limit`` bytes of output; :class:`ReplyTooLarge` past it, :class:`BadEncoding` when it does
    not decode."""
    name = (encoding or "identity").strip().lower()
    if name == "identity":
        return body
    if name == "gzip":
        return _inflate(body, 16 + zlib.MAX_WBITS, name, limit)
    if name == "deflate":  # zlib-wrapped, as the standard says; some servers send it raw
        try:
            return _inflate(body, zlib.MAX_WBITS, name, limit)
        except BadEncoding:
            return _inflate(body, -zlib.MAX_WBITS, name, limit)
    raise BadEncoding(f"unsupported Content-Encoding {encoding!r} (asked for {ACCEPT_ENCODING})")


def _inflate(body: bytes, wbits: int, name: str, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    out: list[bytes] = []
    size = 0
    pending = body
    try:
        while pending or not inflater.eof:
            piece = inflater.decompress(pending, CHUNK_BYTES)
            pending = inflater.unconsumed_tail
            size += len(piece)
            if size > limit:
                raise ReplyTooLarge(f"reply inflating past transport.max_reply_bytes={limit} ({name}, "
                                    f"{len(body)} bytes compressed); the rest not inflated")
            out.append(piece)
            if not piece and not pending:
                break
    except zlib.error as exc:
        raise BadEncoding(f"cannot decode a {name} body: {exc}") from None
    if not inflater.eof:
        raise BadEncoding(f"cannot decode a {name} body: it ends before its compressed stream does")
    return b"".join(out)
