"""The progress view: plain lines off a terminal, a live rich bar on one, from a real run's events."""

from __future__ import annotations

import io

from combee_fast.config import SessionConfig, SimConfig, TaskConfig
from combee_fast.gepa.settings import GepaConfig
from combee_fast.readout.progress import clock
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.run.events import Events
from combee_fast.session import open_session

CONFIG = SessionConfig(task=TaskConfig(train_split="train[0:24]", val_split="selection[0:10]"),
                       sim=SimConfig("flat", 1e-4))


class _Terminal(io.StringIO):
    """A wide terminal."""

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("no file descriptor")


async def test_plain_lines_count_steps_budget_and_time_with_simulated_seconds_labelled_apart() -> None:
    stream = io.StringIO()
    async with open_session(CONFIG) as session:
        progress = session.progress(stream=stream)
        result = await session.train(plan=FixedBatch(8), events=Events(progress))
    lines = stream.getvalue().splitlines()
    assert len(lines) == result.steps and not progress.live
    assert lines[0].startswith("[combee] step 1 of ~3  samples 8 of 24 (33%)  elapsed 0:00:0")
    assert lines[2].startswith("[combee] step 3 of ~3  samples 24 of 24 (100%)")
    assert all(" eta " in line and " bullets " in line and line.split("  ")[-1].startswith("sim ") for line in lines)
    assert "val " in lines[-1]


async def test_on_a_terminal_the_bar_is_drawn_and_gepa_counts_metric_calls_and_candidates(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    stream = _Terminal()
    config = SessionConfig(method="gepa", task=CONFIG.task, sim=CONFIG.sim,
                           learners={"gepa": GepaConfig(max_metric_calls=60)})
    async with open_session(config) as session:
        progress = session.progress(stream=stream)
        assert progress.live and progress.budget is not None and progress.budget.unit == "metric calls"
        await session.train(events=Events(progress))
    screen = stream.getvalue()
    assert "[gepa] step" in screen and "metric calls" in screen and "candidates" in screen and "bullets" not in screen
    assert progress._bar is None  # stopped at the run's end


def test_clock_reads_hours_minutes_seconds() -> None:
    assert (clock(0), clock(61), clock(3725.9), clock(-3)) == ("0:00:00", "0:01:01", "1:02:05", "0:00:00")


async def test_a_real_endpoint_gets_no_simulated_seconds() -> None:
    stream = io.StringIO()
    async with open_session(CONFIG) as session:
        progress = session.progress(stream=stream)
        progress.simulated = lambda: False  # as on an endpoint that reports no simulated time
        await session.train(plan=FixedBatch(8), events=Events(progress))
    assert stream.getvalue() and " sim " not in stream.getvalue()
