"""Length-prefixed frames over a byte stream (a child process's stdin and stdout): each payload
with its 4-byte big-endian length in front, at most :data:`MAX_FRAME_BYTES` long."""

from __future__ import annotations

import asyncio
import struct

_LENGTH = struct.Struct(">I")
MAX_FRAME_BYTES = 1 << 28
"""Longest frame either side reads (a published playbook and its text fit many times over)."""


def frame(data: bytes) -> bytes:
    """``data`` with its 4-byte big-endian length in front."""
    return _LENGTH.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """The next frame's payload; ``None`` at a clean end of stream. A length over
    :data:`MAX_FRAME_BYTES` raises ``ValueError`` before anything more is read."""
    try:
        head = await reader.readexactly(_LENGTH.size)
    except asyncio.IncompleteReadError:
        return None
    length = _LENGTH.unpack(head)[0]
    if length > MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {length} bytes, over {MAX_FRAME_BYTES} (not a frame of this protocol?)")
    return await reader.readexactly(length)
