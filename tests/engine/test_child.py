"""The child-process supervisor with a real worker process: frames both ways (what the worker
prints never lands among them), how it ended (exit code and last error line, or signal), stop."""

from __future__ import annotations

import os
from pathlib import Path

from combee_fast.engine.child import Child

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


async def test_frames_go_both_ways_and_an_exit_says_its_code_and_last_error_line(capfd) -> None:
    child = await Child.start("tests.engine.frame_worker", env=ENV)
    child.send(b"one", b"print", b"x" * 100_000)  # one write, three frames
    assert [await child.receive() for _ in range(3)] == [b"one", b"print", b"x" * 100_000]
    child.send(b"die")
    assert await child.receive() is None
    assert await child.ended() == "exited with code 3: boom: the last words"
    assert await child.ended() == "exited with code 3: boom: the last words"  # asked again: the same
    relayed = capfd.readouterr().err
    assert "noise on stdout" in relayed and "boom: the last words" in relayed  # its stderr, passed on


async def test_a_killed_worker_says_its_signal_and_stop_ends_one_at_the_end_of_its_input() -> None:
    killed = await Child.start("tests.engine.frame_worker", env=ENV)
    killed.kill()
    assert await killed.ended() == "was killed by signal 9"
    stopped = await Child.start("tests.engine.frame_worker", env=ENV)
    stopped.send(b"last")
    assert await stopped.receive() == b"last"
    assert await stopped.stop(10.0) == "exited with code 0"
    stopped.send(b"after")  # its input is closed: nothing is written, nothing raises
    assert stopped.unsent() == 0
