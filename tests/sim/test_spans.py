"""Critical-path depth and peak concurrency from request spans."""

from __future__ import annotations

from combee_fast.sim.spans import chain_depth, peak_overlap


def test_serial_calls_chain_to_their_number() -> None:
    spans = [(0.0, 1.0), (1.0, 2.5), (2.6, 3.0)]
    assert chain_depth(spans) == 3
    assert peak_overlap(spans) == 1


def test_waves_of_concurrent_calls_chain_to_the_number_of_waves() -> None:
    wave1 = [(0.0, 1.0 + i / 10) for i in range(5)]
    wave2 = [(1.5 + i / 100, 3.0) for i in range(4)]
    assert chain_depth(wave1 + wave2) == 2
    assert peak_overlap(wave1 + wave2) == 5


def test_empty() -> None:
    assert chain_depth([]) == 0
    assert peak_overlap([]) == 0
