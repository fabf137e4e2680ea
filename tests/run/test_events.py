"""A run's event stream: every step, version and failed call, and the stop, to every consumer;
a broken observer is dropped, the run directory's record is not."""

from __future__ import annotations

import msgspec
import pytest

from combee_fast.config import FaultConfig, SessionConfig, SimConfig, TaskConfig
from combee_fast.record.rundir import RunDir
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.run.events import CallFailed, Event, Events, RunStopped, StepDone, VersionApplied
from combee_fast.session import open_session

CONFIG = SessionConfig(task=TaskConfig(train_split="train[0:24]", val_split="val[0:10]"), sim=SimConfig("flat", 1e-4))


async def test_every_step_version_failed_call_and_the_stop_reach_the_consumers(tmp_path) -> None:
    seen: list[Event] = []
    config = msgspec.structs.replace(CONFIG, sim=SimConfig("flat", 1e-4, faults=FaultConfig(rate_malformed=0.2)))
    run_dir = RunDir(tmp_path / "run")
    async with open_session(config) as session:
        result = await session.train(plan=FixedBatch(8), run_dir=run_dir, events=Events(seen.append))
    run_dir.close()
    steps = [e.row for e in seen if isinstance(e, StepDone)]
    assert steps == list(result.ledger) and len(steps) == result.steps >= 3
    versions = [e.version for e in seen if isinstance(e, VersionApplied)]
    assert versions == sorted(set(versions)) and versions[-1] == result.final.version
    assert isinstance(seen[-1], RunStopped) and seen[-1].ends == "done" and seen[-1].steps == result.steps
    failed = [e for e in seen if isinstance(e, CallFailed)]
    assert failed and len(failed) == len((tmp_path / "run" / "errors.jsonl").read_text().splitlines())
    assert msgspec.json.decode(msgspec.json.encode(seen[-1]), type=Event) == seen[-1]  # tagged: a JSONL log round-trips


async def test_a_consumer_that_raises_is_dropped_and_the_run_goes_on(capsys) -> None:
    calls = []

    def broken(event: Event) -> None:
        calls.append(event)
        raise RuntimeError("tracker down")

    async with open_session(CONFIG) as session:
        result = await session.train(plan=FixedBatch(8), events=Events(broken))
    assert result.steps >= 3 and len(calls) == 1
    assert "tracker down" in capsys.readouterr().err


def test_a_critical_consumer_stops_the_emitter() -> None:
    def record(event: Event) -> None:
        raise OSError(28, "No space left on device")

    events = Events()
    events.subscribe(record, critical=True)
    with pytest.raises(OSError, match="No space left"):
        events.emit(RunStopped("x", "done", 0))
