"""The environment's seconds carried along what each asynchronous-search task waited for."""

from __future__ import annotations

from combee_fast.gepa.delays import EnvDelays


def test_proposals_side_by_side_do_not_delay_each_other_and_the_time_is_the_latest_delayed_end() -> None:
    delays = EnvDelays()
    a = delays.admitted()
    b = delays.admitted()
    a_end = delays.start(a, "grade", queued=False) + 9.0  # a's grading spent 9 s in its environments
    delays.ended("grade", 10.0, a_end)
    b_end = delays.start(b, "grade", queued=False) + 1.0  # b's started beside it, not after it
    delays.ended("grade", 12.0, b_end)
    assert b_end == 1.0 and delays.time(12.0) == 19.0  # a's grading ends last: at 10 + 9
    assert delays.time(30.0) == 30.0  # never less than the schedule's clock


def test_a_queued_task_a_pool_reader_and_a_new_proposal_wait_for_what_they_waited_on() -> None:
    delays = EnvDelays()
    delays.ended("validate", 5.0, 4.0)
    assert delays.start(0.5, "validate", queued=True) == 4.0  # took the slot the 4-second task freed
    assert delays.start(0.5, "validate", queued=False) == 0.5
    assert delays.start(0.5, "screen", queued=True) == 0.5  # no screening ended: nothing freed its slot
    delays.joined(3.0)
    delays.done(2.0)
    assert delays.pool == 3.0 and delays.admitted() == 3.0
    assert delays.after_pool(1.0) == 3.0 and delays.after_pool(5.0) == 5.0  # a decision that read the pool
    delays.done(6.0)
    assert delays.admitted() == 6.0
