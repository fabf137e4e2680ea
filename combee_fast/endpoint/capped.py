"""Reading a reply body without letting its size decide the process's memory.

A body announced (``Content-Length``) or found while streaming to be larger than the limit is not
read further: :class:`ReplyTooLarge`. The connection is then closed rather than reused (aiohttp
closes a connection released with its body unread).
"""

from __future__ import annotations

from typing import Any

CHUNK_BYTES = 64 * 1024
"""Bytes read at a time from a body of unknown or large size."""


class ReplyTooLarge(Exception):
    """A reply body over the limit: the message names the limit and the size seen."""


async def read_capped(response: Any, limit: int) -> bytes:
    """The body of ``response`` (an ``aiohttp.ClientResponse``), at most ``limit`` bytes; else
    :class:`ReplyTooLarge`. A body announced within the limit is read in one go (the common case)."""
    announced = response.content_length
    if announced is not None:
        if announced > limit:
            raise ReplyTooLarge(f"reply of {announced} bytes, over transport.max_reply_bytes={limit}; not read")
        return await response.read()
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(CHUNK_BYTES):
        size += len(chunk)
        if size > limit:
            raise ReplyTooLarge(f"reply over transport.max_reply_bytes={limit} (read {size} bytes); the rest not read")
        chunks.append(chunk)
    return b"".join(chunks)
