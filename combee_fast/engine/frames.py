"""Length-prefixed frames over a byte stream (a child process's stdin and stdout): each payload
with its 4-byte big-endian length in front."""

from __future__ import annotations

import asyncio
import struct

_LENGTH = struct.Struct(">I")


def frame(data: bytes) -> bytes:
    """``data`` with its 4-byte big-endian length in front."""
    return _LENGTH.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """The next frame's payload; ``None`` at a clean end of stream."""
    try:
        head = await reader.readexactly(_LENGTH.size)
    except asyncio.IncompleteReadError:
        return None
    return await reader.readexactly(_LENGTH.unpack(head)[0])
