"""A worker for tests/engine/test_child.py (``python -m tests.engine.frame_worker``): echoes every
frame; ``print`` prints to stdout first (which must not reach the frames); ``die`` writes a last
error line and exits with code 3; the end of its input ends it with code 0."""

from __future__ import annotations

import asyncio
import sys

from combee_fast.engine.child import parent_pipes
from combee_fast.engine.frames import frame, read_frame


async def main() -> int:
    reader, writer = await parent_pipes()
    while (data := await read_frame(reader)) is not None:
        if data == b"die":
            print("boom: the last words", file=sys.stderr, flush=True)
            return 3
        if data == b"print":
            print("noise on stdout", flush=True)
        writer.write(frame(data))
        await writer.drain()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
