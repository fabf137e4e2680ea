"""The JSONL event log: every event back as it was, writes bounded, the file rotated past its size."""

from __future__ import annotations

import threading

import msgspec
import pytest

from combee_fast.embedded.events import ReleaseDecision
from combee_fast.readout.event_log import EventLog, LoggedEvent
from combee_fast.run.events import (CallFailed, EpisodeFailed, EpisodeRerun, Events, Overloaded, RetryAfter, RunStopped,
                                    VersionApplied)
from combee_fast.schema import ToolCall


def _read(path) -> list[LoggedEvent]:
    return [msgspec.json.decode(line, type=LoggedEvent) for line in path.read_bytes().splitlines()]


def test_every_event_is_one_line_that_decodes_back_to_it(tmp_path) -> None:
    events = [VersionApplied(3, 10, 2), ReleaseDecision("rollback", 4, 3, {"lower": -0.4, "upper": -0.01, "n": 70}),
              CallFailed("generator", "5xx", "HTTP 503"), RunStopped("done", "done", 5),
              CallFailed("reflector", "malformed", "not JSON", "malformed_json", None, "{oops"),
              RetryAfter("sim", 0.5), Overloaded("sim", 8),
              EpisodeFailed("train:3", "step_timeout", "over 20 s", episode="e0:train:3:r0:v2", step=1,
                            action=ToolCall("run", '{"command": "sleep 99"}'), observation="", raw=None),
              EpisodeRerun("e0:train:3:r0:v2", "train:3", "actor 1 died")]
    with EventLog(tmp_path / "events.jsonl") as log:
        hub = Events()
        hub.subscribe(log, critical=True)
        for event in events:
            hub.emit(event)
    assert _read(tmp_path / "events.jsonl") == events
    with EventLog(tmp_path / "events.jsonl", kinds=(ReleaseDecision,)) as log:  # appends, filtered
        for event in events:
            log(event)
    assert _read(tmp_path / "events.jsonl") == [*events, events[1]]


def test_writes_are_bounded_by_the_buffer_and_the_clock(tmp_path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(path, buffer=10, flush_s=3600)
    for step in range(25):
        log(VersionApplied(step, step, step))
    assert log.written == 20 and len(path.read_bytes().splitlines()) == 20  # two full buffers out, 5 waiting
    log.flush()
    assert log.written == 25
    timed = EventLog(tmp_path / "timed.jsonl", buffer=1000, flush_s=0.0)
    timed(VersionApplied(1, 1, 1))
    assert timed.written == 1  # nothing waits longer than flush_s while events come
    log.close()
    timed.close()
    with pytest.raises(ValueError, match="is closed"):
        log(VersionApplied(1, 1, 1))


def test_a_full_file_is_rotated_so_the_log_stays_bounded_on_disk(tmp_path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path, buffer=1, max_bytes=2_000) as log:
        for step in range(200):
            log(VersionApplied(step, step, step))
    rotated = tmp_path / "events.jsonl.1"
    assert log.rotations >= 3 and path.stat().st_size <= 2_000 and rotated.stat().st_size <= 2_000
    kept = _read(rotated) + _read(path)
    assert [e.version for e in kept] == list(range(200 - len(kept), 200))  # the newest, in order


def test_events_from_several_threads_are_written_whole(tmp_path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path, buffer=7) as log:
        def emit(thread: int) -> None:
            for step in range(500):
                log(VersionApplied(step, thread, step))

        threads = [threading.Thread(target=emit, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    events = _read(path)
    assert len(events) == 2_000 and {(e.size, e.version) for e in events} == {(t, s) for t in range(4) for s in range(500)}
