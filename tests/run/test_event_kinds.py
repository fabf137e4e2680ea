"""Each event a session emits below the run loop, from a real run on the simulated endpoint, to a
subscriber: failed calls, a server's Retry-After, an overload, finished and failed episodes; and
the run directory's record, a subscriber too, holding exactly what the events said. A critical
consumer that fails stops the run. (An episode re-run after its worker was lost:
``tests/rollouts/test_ray.py``, where a node is killed mid-run.)"""

from __future__ import annotations

import io
import json
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from combee_fast.config import (AgentConfig, FaultConfig, MapConfig, SessionConfig, SimConfig, TaskConfig,
                                TrainConfig, TransportConfig)
from combee_fast.errors import EXIT_STORAGE, CallsFailed
from combee_fast.readout.notices import WaitNotices
from combee_fast.record.rundir import RunDir
from combee_fast.rollouts.journal import trace_record
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.run.events import (CallFailed, EpisodeFailed, EpisodeFinished, Event, Events, Overloaded, RetryAfter,
                                    StepDone)
from combee_fast.session import open_session

FORMULA = SessionConfig(task=TaskConfig(train_split="train[0:24]", val_split="val[0:6]"), sim=SimConfig("flat", 1e-4))
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _of(seen: list[Event], kind: type) -> list:
    return [event for event in seen if isinstance(event, kind)]


async def test_failed_calls_are_events_and_each_is_its_line_of_errors_jsonl(tmp_path: Path) -> None:
    config = msgspec.structs.replace(FORMULA, sim=SimConfig("flat", 1e-4, faults=FaultConfig(rate_malformed=0.2)))
    seen: list[Event] = []
    run_dir = RunDir(tmp_path / "run")
    async with open_session(config) as session:
        await session.train(plan=FixedBatch(8), run_dir=run_dir, events=Events(seen.append))
        kept = list(session.calls.failures)
    run_dir.close()
    failed = _of(seen, CallFailed)
    assert failed and all(event.error_kind == "malformed_json" and event.raw for event in failed)
    records = [json.loads(msgspec.json.encode(event.record())) for event in failed]
    assert records == _lines(tmp_path / "run" / "errors.jsonl")  # the same lines, in the order they happened
    assert kept == [event.record() for event in failed][-len(kept):]  # the in-memory history is the same record


async def test_a_server_asking_to_wait_is_a_retry_after_event_and_a_notice() -> None:
    config = msgspec.structs.replace(FORMULA, sim=SimConfig("flat", 1e-4, faults=FaultConfig(rate_429=0.3)))
    seen: list[Event] = []
    said = io.StringIO()
    async with open_session(config) as session:
        session.events.subscribe(WaitNotices(said))
        await session.train(plan=FixedBatch(8), events=Events(seen.append))
    waits = _of(seen, RetryAfter)
    assert waits and all(event.endpoint == "sim:flat" and event.seconds >= 0 for event in waits)
    lines = said.getvalue().splitlines()
    assert 1 <= len(lines) <= len(waits) and all(line.startswith("[waiting] ") and "(Retry-After)" in line
                                                  for line in lines)


async def test_a_timeout_that_lowers_the_requests_in_flight_is_an_overload_event_and_a_notice() -> None:
    config = msgspec.structs.replace(
        FORMULA, sim=SimConfig("flat", 0.001, faults=FaultConfig(rate_stall=0.25, stall_s=5000.0)),
        transport=TransportConfig(attempt_timeout_s=0.2, max_retries=6, concurrency=16),
        train=TrainConfig(epochs=1, batch_size=16))
    seen: list[Event] = []
    said = io.StringIO()
    async with open_session(config) as session:
        session.events.subscribe(WaitNotices(said))
        await session.train(plan=FixedBatch(16), events=Events(seen.append))
    overloads = _of(seen, Overloaded)
    assert overloads and all(1 <= event.limit < 16 for event in overloads)
    assert overloads[0].limit == 8  # the first timeout halves the limit
    lines = said.getvalue().splitlines()
    assert len(lines) == len(overloads) and all(line.startswith("[overload] ") for line in lines)


@needs_bwrap
async def test_each_episode_run_is_an_event_and_its_line_of_trajectories_jsonl(tmp_path: Path) -> None:
    config = SessionConfig(task=TaskConfig("terminal", train_split="train[0:8]", val_split="selection[0:2]"),
                           sim=SimConfig("flat", 1e-4))
    seen: list[Event] = []
    run_dir = RunDir(tmp_path / "run")
    async with open_session(config) as session:
        result = await session.train(plan=FixedBatch(8), run_dir=run_dir, events=Events(seen.append))
    run_dir.close()
    finished = _of(seen, EpisodeFinished)
    assert len(finished) == result.episodes + 2  # the learning episodes and the 2 of the validation after them
    written = [json.loads(msgspec.json.encode(trace_record(e.trajectory, e.example))) for e in finished]
    assert written == _lines(tmp_path / "run" / "trajectories.jsonl")
    assert {e.trajectory.item_id for e in finished} >= {f"train:{i}" for i in range(8)}


async def test_a_failed_episode_and_its_unusable_replies_are_events_and_lines_of_errors_jsonl(tmp_path: Path) -> None:
    # the formula world does not play an agent: no reply is an action, every episode fails as unparsed
    # (no regeneration round), and the run stops at once on its failed generator replies
    config = msgspec.structs.replace(FORMULA, task=TaskConfig(train_split="train[0:6]", val_split="val[0:2]"),
                                     agent=AgentConfig(factory="react"), map=MapConfig(max_rounds=0))
    seen: list[Event] = []
    run_dir = RunDir(tmp_path / "run")
    async with open_session(config) as session:
        with pytest.raises(CallsFailed, match="calls failed"):
            await session.train(plan=FixedBatch(6), run_dir=run_dir, events=Events(seen.append))
    run_dir.close()
    lines = _lines(tmp_path / "run" / "errors.jsonl")
    failed = _of(seen, EpisodeFailed)
    assert len(failed) == 6 + 2 and all(event.label == "unparsed" and event.episode for event in failed)
    assert [json.loads(msgspec.json.encode(e.record())) for e in failed] == [line for line in lines if "episode" in line]
    unusable = _of(seen, CallFailed)
    assert len(unusable) == 2 * (6 + 2) and all(e.error_kind == "schema_mismatch" and e.raw for e in unusable)
    assert [json.loads(msgspec.json.encode(e.record())) for e in unusable] == [line for line in lines if "role" in line]
    assert len(_of(seen, EpisodeFinished)) == 6 + 2  # failed ones are finished trajectories too


async def test_a_critical_consumer_that_fails_stops_the_run_at_that_event(tmp_path: Path) -> None:
    config = msgspec.structs.replace(FORMULA, sim=SimConfig("flat", 1e-4, faults=FaultConfig(rate_500=0.5)),
                                     transport=TransportConfig(max_retries=0))
    steps: list[StepDone] = []
    kept: list[CallFailed] = []
    refused: list[CallFailed] = []

    def full_disk(event: Event) -> None:  # subscribed before the run directory's record: full after 2 lines
        if isinstance(event, StepDone):
            steps.append(event)
        elif isinstance(event, CallFailed):
            if len(kept) == 2:
                refused.append(event)
                raise OSError(28, "No space left on device")
            kept.append(event)

    events = Events()
    events.subscribe(full_disk, critical=True)
    run_dir = RunDir(tmp_path / "run")
    async with open_session(config) as session:
        with pytest.raises(OSError, match="No space left on device"):
            await session.train(plan=FixedBatch(8), run_dir=run_dir, events=events)
        session.events.emit(CallFailed("generator", "5xx", "after the run"))
    run_dir.close()
    assert refused and refused[-1].message != "after the run"  # after the run, the run's hub hears nothing
    assert len(_lines(tmp_path / "run" / "errors.jsonl")) == len(kept) == 2
    assert not steps and not _lines(tmp_path / "run" / "ledger.jsonl")  # the run stopped in its first step


def _file_size_limit(limit: int):
    def limit_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_files


def test_a_record_that_cannot_be_written_stops_the_run_in_one_line(tmp_path: Path) -> None:
    """The record is written from inside a step's concurrent calls: its failure is the run's, one
    line naming the file (exit 4), not a task group's traceback. ``replies.jsonl`` (every reply)
    grows fastest and is written first for each call, so it is the file that hits the limit."""
    out = tmp_path / "run"
    learn = [sys.executable, "-m", "combee_fast.cli", "learn", "--task", "formula", "--batch-size", "10",
             "--train-split", "train[0:30]", "--val-split", "val[0:10]", "--fault-malformed", "0.8", "--quiet",
             "--out", str(out)]
    # replies.jsonl (every reply) and errors.jsonl (most replies unusable, each line with its raw reply) outgrow
    # 5,000 bytes within the first step
    done = subprocess.run(learn, capture_output=True, text=True, timeout=300, preexec_fn=_file_size_limit(5_000))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == EXIT_STORAGE and lines == [f"combee learn: error: cannot write {out / 'replies.jsonl'}: "
                                                         "File too large"], done.stderr
    assert (out / "checkpoint.bin").is_file() and not _lines(out / "ledger.jsonl")  # stopped in its first step


async def test_a_run_given_the_sessions_own_hub_is_refused() -> None:
    async with open_session(FORMULA) as session:
        with pytest.raises(ValueError, match="a hub of its own"):
            await session.train(plan=FixedBatch(8), events=session.events)
