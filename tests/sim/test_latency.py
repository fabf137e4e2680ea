"""The continuous-batching latency model, in simulated time (no clock, no I/O)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from combee_fast.sim.latency import (
    FLAT,
    H200_70B,
    PRESETS,
    BatchModel,
    Job,
    LatencyPreset,
    job_for,
    resolve_preset,
)
from combee_fast.errors import ConfigError


def run_to_end(model: BatchModel) -> None:
    while (next_time := model.next_event_time()) is not None:
        model.advance(next_time)


def test_flat_is_exactly_400ms_plus_25ms_per_completion_token_whatever_the_load() -> None:
    model = BatchModel(FLAT)
    jobs = [job_for(FLAT, 0.0, prompt_tokens=5000, completion_tokens=n) for n in range(0, 1000, 7)]
    for job in jobs:
        model.submit(job, 0.0)
    run_to_end(model)
    for n, job in zip(range(0, 1000, 7), jobs):
        assert job.finished_at == pytest.approx(0.4 + 0.025 * n, abs=1e-9)
    assert model.queued == 0 and model.running == 0


def test_presets_are_named_and_documented() -> None:
    assert set(PRESETS) == {"flat", "h200-70b", "hosted-api"}
    assert 64 <= H200_70B.max_running <= 128
    assert 0.025 <= H200_70B.decode_s_per_token <= 0.035
    assert 1.5 <= H200_70B.full_batch_slowdown <= 2.0
    assert 5000 <= H200_70B.prefill_tokens_per_s <= 10000
    assert resolve_preset("h200-70b") is H200_70B
    with pytest.raises(ConfigError, match="unknown latency preset 'a100'.*flat"):
        resolve_preset("a100")


def test_per_token_latency_grows_linearly_to_the_full_batch_slowdown() -> None:
    base = H200_70B.decode_s_per_token
    assert H200_70B.time_per_token(1) == pytest.approx(base)
    assert H200_70B.time_per_token(H200_70B.max_running) == pytest.approx(base * 1.8)
    assert H200_70B.time_per_token(1000) == pytest.approx(base * 1.8)
    middle = (H200_70B.max_running + 1) / 2
    assert H200_70B.time_per_token(int(middle)) == pytest.approx(base * 1.4, rel=0.01)


def test_h200_queues_fifo_beyond_max_running_sequences() -> None:
    preset = H200_70B
    capacity = preset.max_running
    model = BatchModel(preset)
    jobs = [job_for(preset, 0.0, prompt_tokens=800, completion_tokens=200) for _ in range(capacity + 10)]
    for job in jobs:
        model.submit(job, 0.0)
    assert model.running == capacity and model.queued == 10
    run_to_end(model)
    first_wave = preset.first_token_s(800) + 200 * preset.time_per_token(capacity)
    for job in jobs[:capacity]:
        assert job.finished_at == pytest.approx(first_wave)
    for job in jobs[capacity:]:
        assert job.admitted_at == pytest.approx(first_wave)  # waited for the first wave
        second_wave = preset.first_token_s(800) + 200 * preset.time_per_token(10)
        assert job.finished_at == pytest.approx(first_wave + second_wave)


def test_a_lone_request_is_faster_than_one_in_a_full_batch() -> None:
    alone = BatchModel(H200_70B)
    job = job_for(H200_70B, 0.0, 100, 300)
    alone.submit(job, 0.0)
    run_to_end(alone)
    assert job.finished_at == pytest.approx(H200_70B.first_token_s(100) + 300 * 0.030)


def test_cancelling_a_running_job_admits_the_next_waiting_one() -> None:
    preset = LatencyPreset(name="one-slot", overhead_s=1.0, decode_s_per_token=0.0, max_running=1)
    model = BatchModel(preset)
    first, second = Job(0.0, 1.0, 0), Job(0.0, 1.0, 0)
    model.submit(first, 0.0)
    model.submit(second, 0.0)
    assert model.queued == 1
    model.cancel(first, 0.25)
    assert first.cancelled and second.admitted_at == 0.25 and model.queued == 0
    run_to_end(model)
    assert first.finished_at is None and second.finished_at == pytest.approx(1.25)


def test_constant_preset_ignores_size_and_load() -> None:
    preset = LatencyPreset.constant(0.2)
    model = BatchModel(preset)
    jobs = [job_for(preset, 0.1, prompt_tokens=n * 100, completion_tokens=n) for n in range(50)]
    for job in jobs:
        model.submit(job, 0.1)
    run_to_end(model)
    assert all(job.finished_at == pytest.approx(0.3) for job in jobs)


@pytest.mark.parametrize("field, value, message", [
    ("max_running", 0, "max_running must be >= 1"),
    ("full_batch_slowdown", 0.5, "full_batch_slowdown must be >= 1"),
    ("prefill_tokens_per_s", 0.0, "prefill_tokens_per_s must be a number > 0"),
    ("decode_s_per_token", -1.0, "latencies must be numbers from 0 to 3600 s"),
])
def test_invalid_preset_values_are_rejected_by_name(field: str, value: float, message: str) -> None:
    options = {"name": "bad", "overhead_s": 0.1, "decode_s_per_token": 0.01, "max_running": 8,
               "full_batch_slowdown": 1.5, field: value}
    with pytest.raises(ConfigError, match=f"'bad'.*{message}"):
        LatencyPreset(**options)


arrivals = st.lists(
    st.tuples(st.floats(0, 5), st.integers(0, 2000), st.integers(0, 300)), min_size=1, max_size=60
)


@settings(max_examples=60, deadline=None)
@given(arrivals, st.integers(1, 8))
def test_every_job_finishes_fifo_within_capacity_and_no_faster_than_alone(
    requests: list[tuple[float, int, int]], capacity: int
) -> None:
    preset = LatencyPreset(name="small", overhead_s=0.05, prefill_tokens_per_s=5000.0,
                           decode_s_per_token=0.02, max_running=capacity, full_batch_slowdown=2.0)
    model = BatchModel(preset)
    jobs = []
    for arrival, prompt, completion in sorted(requests):
        model.advance(arrival)
        job = job_for(preset, arrival, prompt, completion)
        model.submit(job, arrival)
        jobs.append(job)
        assert model.running <= capacity
    run_to_end(model)
    admissions = [job.admitted_at for job in jobs]
    assert admissions == sorted(admissions)  # FIFO
    for job in jobs:
        assert job.finished_at is not None
        alone = job.first_token_s + job.decode_tokens * preset.decode_s_per_token
        assert job.finished_at - job.arrival >= alone - 1e-9
    # at any admission instant, at most `capacity` jobs are between admission and finish
    for job in jobs:
        assert job.admitted_at is not None
        overlapping = sum(1 for other in jobs if other.admitted_at <= job.admitted_at < other.finished_at)
        assert overlapping <= capacity


def test_busy_time_counts_only_time_with_a_sequence_running() -> None:
    model = BatchModel(FLAT)
    first = job_for(FLAT, 0.0, prompt_tokens=10, completion_tokens=40)  # 0.4 + 1.0 s
    model.submit(first, 0.0)
    assert model.busy_until(0.5) == pytest.approx(0.5)  # read mid-job, changes nothing
    run_to_end(model)
    assert first.finished_at == pytest.approx(1.4) and model.busy_until(1.4) == pytest.approx(1.4)
    assert model.busy_until(3.0) == pytest.approx(1.4)  # idle from 1.4 s to 3 s
    overlapping = [job_for(FLAT, 3.0, 10, 40), job_for(FLAT, 3.0, 10, 20)]  # 1.4 s and 0.9 s, together
    for job in overlapping:
        model.submit(job, 3.0)
    run_to_end(model)
    assert model.busy_until(10.0) == pytest.approx(1.4 + 1.4)  # concurrent work is one busy interval


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 50), st.integers(0, 300)), min_size=1, max_size=30))
def test_busy_time_is_the_union_of_the_jobs_intervals_under_load(arrivals: list[tuple[float, int]]) -> None:
    preset = H200_70B
    model = BatchModel(preset)
    jobs = []
    for arrival, tokens in sorted(arrivals):
        job = job_for(preset, arrival, prompt_tokens=200, completion_tokens=tokens)
        model.submit(job, arrival)
        jobs.append(job)
    run_to_end(model)
    intervals = sorted((j.admitted_at, j.finished_at) for j in jobs)
    union, end = 0.0, -1.0
    for start, stop in intervals:
        if stop > end:
            union += stop - max(start, end)
            end = stop
    assert model.busy_until(model.now) == pytest.approx(union, rel=1e-9, abs=1e-9)
