"""A trajectory rendered for the reflector within its budget: errors and the final steps kept,
the middle elided with a count, the whole within the characters the endpoint's context leaves."""

from __future__ import annotations

from combee_fast.roles.trajectory import LAST_STEPS, render_trajectory, trajectory_budget
from combee_fast.schema import CallError, EpisodeError, Message, Step, ToolCall, Trajectory, Usage


def _trajectory(steps: int, *, wrong: tuple[int, ...] = (), observation: str = "x" * 900) -> Trajectory:
    made = [
        Step(i, f"thinking about step {i}", ToolCall("run", f'{{"command": "echo {i}"}}'), f"out {i} " + observation,
             0.5, 0.01, Usage(role="generator"), env_error="disk_full" if i in wrong else None)
        for i in range(steps)
    ]
    made.append(Step(steps, "", None, "", 0.5, 0.0, Usage(role="generator"),
                     error=CallError("malformed_json", "not JSON"), raw="{{{ broken"))
    return Trajectory("k", "train:0", 0, 0, "sha", 1, tuple(made), "done", 0.0, "not done: out.txt does not exist",
                      EpisodeError("disk_full", "run: No space left on device", 7), finished=False)


def test_a_short_trajectory_is_rendered_whole() -> None:
    text = render_trajectory(_trajectory(2, observation="ok"))
    assert "Step 1:" in text and "Step 2:" in text and "Step 3:" in text and "elided" not in text
    assert "raw reply: {{{ broken" in text and "Episode failed (disk_full)" in text
    assert "did not finish the episode itself" in text


def test_a_long_trajectory_keeps_its_first_failed_and_last_steps_and_counts_the_rest() -> None:
    text = render_trajectory(_trajectory(40, wrong=(7,)), 3000)
    assert len(text) <= 3000
    assert "Step 1:" in text and "Step 8:" in text and "environment: disk_full" in text
    for last in range(41 - LAST_STEPS + 1, 42):
        assert f"Step {last}:" in text
    assert "[... 6 steps elided ...]" in text  # steps 2-7
    assert "Step 20:" not in text and "Final answer: done" in text


def test_the_budget_is_what_the_context_leaves() -> None:
    others = [Message("system", "s" * 3000), Message("user", "u" * 300)]
    assert trajectory_budget(others, None, 1024) == 12_000
    left = trajectory_budget(others, 4096, 1024)
    assert 0 < left < 12_000 and left == (4096 - 1024 - 1000 - 8 - 100 - 8) * 3
    assert trajectory_budget(others, 1500, 1024) == 0
