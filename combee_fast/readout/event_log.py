"""A JSONL event log: an :class:`~combee_fast.run.events.Events` consumer writing each event as one
JSON line (tagged by ``kind``, so ``msgspec.json.decode(line, type=LoggedEvent)`` reads it back).

Writes are bounded: at most ``buffer`` lines wait in memory and go out in one write when the
buffer is full, when ``flush_s`` seconds have passed since the last write (checked as events
come), and at :meth:`EventLog.close`. A file that would grow past ``max_bytes`` is renamed to
``<name>.1`` (replacing the previous one) and a new one begun, so the log holds at most about
twice ``max_bytes`` on disk, newest last. The log is a file of the caller's choosing (e.g. an
embedded learner's host's); a run directory's own files are written only by
:class:`~combee_fast.record.rundir.RunDir`. Calls are serialised by a lock: a threaded learner
emits from its own thread.

    log = EventLog("release-events.jsonl", kinds=(ReleaseDecision, ReleaseStatus))
    learner = ThreadedLearner(agents, playbook, config, events=Events(log))
    ...
    log.close()
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from combee_fast.embedded.events import EmbeddedEvent
from combee_fast.run.events import Event

LoggedEvent = Event | EmbeddedEvent
"""What an event log holds: a training run's events and an embedded learner's."""

BUFFERED_LINES = 256
"""Lines an event log holds in memory at most before it writes them."""
FLUSH_SECONDS = 1.0
"""Longest an event waits in memory while others keep coming."""
ROTATE_BYTES = 64 * 2**20
"""Size past which an event log file is renamed to ``<name>.1`` and a new one begun."""


class EventLog:
    """Appends events to ``path`` as JSON lines (module docstring); ``kinds``: only these event types."""

    def __init__(self, path: str | os.PathLike[str], *, kinds: Sequence[type[Any]] | None = None,
                 buffer: int = BUFFERED_LINES, flush_s: float = FLUSH_SECONDS, max_bytes: int = ROTATE_BYTES) -> None:
        if buffer < 1 or max_bytes < 1:
            raise ValueError(f"event log: buffer and max_bytes must be >= 1, got {buffer} and {max_bytes}")
        self.path = Path(path)
        self._kinds = tuple(kinds) if kinds is not None else None
        self._buffer_size, self._flush_s, self._max_bytes = buffer, flush_s, max_bytes
        self._encoder = msgspec.json.Encoder()
        self._lines: list[bytes] = []
        self._lock = threading.Lock()
        self._file = self.path.open("ab")
        self._size = self._file.tell()
        self._last_write = time.monotonic()
        self.written = 0  # lines written to disk so far
        self.rotations = 0

    def __call__(self, event: LoggedEvent) -> None:
        if self._kinds is not None and not isinstance(event, self._kinds):
            return
        line = self._encoder.encode(event) + b"\n"
        with self._lock:
            if self._file.closed:
                raise ValueError(f"event log {self.path} is closed")
            self._lines.append(line)
            if len(self._lines) >= self._buffer_size or time.monotonic() - self._last_write >= self._flush_s:
                self._write()

    def flush(self) -> None:
        """Write what waits in memory."""
        with self._lock:
            if not self._file.closed:
                self._write()

    def close(self) -> None:
        """Write what waits and close the file (events after this raise, and the hub drops the log)."""
        with self._lock:
            if not self._file.closed:
                self._write()
                self._file.close()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _write(self) -> None:
        lines, self._lines = self._lines, []
        self._last_write = time.monotonic()
        if not lines:
            return
        data = b"".join(lines)
        if self._size and self._size + len(data) > self._max_bytes:
            self._file.close()
            os.replace(self.path, self.path.with_name(self.path.name + ".1"))
            self._file, self._size = self.path.open("ab"), 0
            self.rotations += 1
        self._file.write(data)
        self._file.flush()
        self._size += len(data)
        self.written += len(lines)
