"""Stages in simulated time: slots, FIFO queues, and events taken in simulated-time order."""

from __future__ import annotations

import pickle

import msgspec
import pytest

from combee_fast.engine.virtual import ScheduleState, StageSchedule


def _run(schedule: StageSchedule[str], durations: dict[str, float]) -> list[tuple[str, str, float]]:
    """Every queued task to its end: ``(stage, key, end)`` in the order the schedule takes them."""
    ended = []
    while True:
        for task in schedule.start_ready():
            schedule.finish(task, durations[task.key])
        event = schedule.next_end()
        if event is None:
            return ended
        ended.append((event.stage, event.key, event.at))


def test_a_stage_runs_at_most_its_limit_at_once_first_in_first_out() -> None:
    schedule: StageSchedule[str] = StageSchedule({"grade": 2})
    for key in "abcd":
        schedule.enqueue("grade", key)
    started = schedule.start_ready()
    assert [t.key for t in started] == ["a", "b"] and schedule.busy("grade") == 2 and schedule.queued("grade") == 2
    assert _finish_all(schedule, started, {"a": 3.0, "b": 1.0}) == ("b", 1.0)
    assert [t.key for t in schedule.start_ready()] == ["c"] and schedule.unfinished()[0].at == 1.0  # b's slot


def _finish_all(schedule: StageSchedule[str], started, durations) -> tuple[str, float]:
    for task in started:
        schedule.finish(task, durations[task.key])
    event = schedule.next_end()
    assert event is not None
    return event.key, event.at


def test_events_come_in_simulated_time_order_whatever_order_durations_arrive_in() -> None:
    durations = {"slow": 5.0, "fast": 1.0, "tie1": 2.0, "tie2": 2.0, "next": 0.5}

    def schedule() -> StageSchedule[str]:
        s: StageSchedule[str] = StageSchedule({"reflect": 4, "screen": 1})
        for key in ("slow", "fast", "tie1", "tie2"):
            s.enqueue("reflect", key)
        return s

    forward, backward = schedule(), schedule()
    started = forward.start_ready()
    for task in started:
        forward.finish(task, durations[task.key])
    for task in reversed(backward.start_ready()):  # the durations arrive in the other order
        backward.finish(task, durations[task.key])
    order = []
    for s in (forward, backward):
        events = []
        while (event := s.next_end()) is not None:
            events.append((event.key, event.at))
        order.append(events)
    assert order[0] == order[1] == [("fast", 1.0), ("tie1", 2.0), ("tie2", 2.0), ("slow", 5.0)]


def test_a_task_queued_after_an_end_starts_at_that_end_and_stages_keep_their_own_slots() -> None:
    s: StageSchedule[str] = StageSchedule({"grade": 1, "screen": 1})
    s.enqueue("grade", "g1")
    s.enqueue("grade", "g2")
    (g1,) = s.start_ready()
    s.finish(g1, 2.0)
    assert s.next_end().key == "g1" and s.clock == 2.0
    s.enqueue("screen", "s1")
    started = s.start_ready()
    assert [(t.stage, t.key, t.at) for t in started] == [("grade", "g2", 2.0), ("screen", "s1", 2.0)]


def test_no_end_is_taken_while_a_started_task_has_no_duration() -> None:
    s: StageSchedule[str] = StageSchedule({"grade": 2})
    s.enqueue("grade", "a")
    s.enqueue("grade", "b")
    a, _ = s.start_ready()
    s.finish(a, 1.0)
    with pytest.raises(RuntimeError, match="no duration"):
        s.next_end()
    with pytest.raises(ValueError, match="negative"):
        s.finish(s.unfinished()[0], -1.0)


def test_the_schedule_is_plain_data_a_checkpoint_can_keep() -> None:
    s: StageSchedule[str] = StageSchedule({"grade": 1, "validate": 2})
    for key in "xyz":
        s.enqueue("validate", key)
    for task in s.start_ready():
        s.finish(task, 1.5)
    copy = pickle.loads(pickle.dumps(s))
    durations = {"x": 1.5, "y": 1.5, "z": 0.25}
    assert _run(copy, durations) == _run(s, durations)
    assert s.idle and s.clock == 1.75


def test_a_kept_state_holds_the_started_tasks_without_duration_and_goes_on_as_the_schedule_does() -> None:
    def started() -> StageSchedule[int]:
        s: StageSchedule[int] = StageSchedule({"grade": 2, "screen": 1})
        for key in (1, 2, 3):
            s.enqueue("grade", key)
        first, second = s.start_ready()
        s.finish(first, 2.0)  # the second's duration is not known yet when the state is kept
        return s

    original = started()
    state = msgspec.msgpack.decode(msgspec.msgpack.encode(original.state()), type=ScheduleState)
    assert state.unfinished == (("grade", 2, 0.0, 1),)
    restored = StageSchedule.restored(state)
    assert [(t.stage, t.key, t.at, t.seq) for t in restored.unfinished()] == [("grade", 2, 0.0, 1)]
    with pytest.raises(RuntimeError, match="no duration"):
        restored.next_end()
    durations = {1: 2.0, 2: 0.5, 3: 1.0}
    for schedule in (original, restored):
        schedule.finish(schedule.unfinished()[0], durations[2])
    assert _run(restored, durations) == _run(original, durations) == [("grade", 2, 0.5), ("grade", 3, 1.5),
                                                                       ("grade", 1, 2.0)]
