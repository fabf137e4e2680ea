"""``bench/real_agent.py``'s own checks, without the 1.5B model: the chores it picks, how it names
an episode's outcome, and the refusal of a pass whose episodes never reached the model (one line,
a non-zero exit, no figure). Its whole plumbing runs on the simulated endpoint in the bench smoke
(``tests/bench/test_smoke.py``, ``real_agent.py --sim``)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from combee_fast.schema import CallError, EpisodeError, Trajectory
from tests.bench_scripts import load_bench


real_agent = load_bench("real_agent")


def _trajectory(reward: float = 0.0, *, error: EpisodeError | None = None, call_error: CallError | None = None,
                finished: bool = False) -> Trajectory:
    return Trajectory(key="k", item_id="i", round=0, version=0, context_sha="", seed=0, steps=(), answer=None,
                      reward=reward, feedback="", error=error, finished=finished, call_error=call_error)


def test_the_chores_are_the_first_of_each_family_in_train_and_test(tmp_path: Path) -> None:
    families = real_agent.write_chores(tmp_path / "chores", 4)
    assert len(families) == len(set(families)) == 4
    for split in ("train", "test"):
        rows = [msgspec.json.decode(line) for line in (tmp_path / "chores" / f"terminal_{split}.jsonl").read_bytes()
                .splitlines()]
        assert [row["family"] for row in rows] == families


def test_an_episode_is_named_by_what_ended_it() -> None:
    assert real_agent.outcome(_trajectory(1.0, finished=True)) == real_agent.SOLVED
    assert real_agent.outcome(_trajectory(finished=True)) == real_agent.WRONG
    assert real_agent.outcome(_trajectory()) == real_agent.STEP_CAP
    assert real_agent.outcome(_trajectory(error=EpisodeError("unparsed", "no action"))) == "unparsed"


def test_a_pass_whose_episodes_never_reached_the_model_is_refused_in_one_line() -> None:
    refused = CallError("connection", "connection refused by 127.0.0.1:9")
    unreached = [_trajectory(error=EpisodeError("model_call", "failed"), call_error=refused)] * 2
    failing = real_agent.Pass("before", ("a", "b", "c"), (*unreached, _trajectory(finished=True)))
    with pytest.raises(SystemExit, match=r"^bench/real_agent.py: 2 of the 3 before episodes never reached the model "
                                         r"\(connection: connection refused by 127.0.0.1:9\); no figure$"):
        real_agent.check_pass(failing)
    real_agent.check_pass(real_agent.Pass("after", ("a", "b", "c"), (unreached[0], *[_trajectory()] * 2)))
