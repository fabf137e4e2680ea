"""pytest-benchmark: each kernel next to its baseline, in one run, in the same group.

    NUMBA_NUM_THREADS=2 python -m pytest bench/test_kernels.py --benchmark-group-by=group

Sizes: the pure-Python scan reference takes seconds per million ops, so the side-by-side scan
group uses 50,000 ops (kernel and reference on the same ops); the 1,000,000-op figures are in
group ``scan-1M`` (kernel only; ``bench/kernels.py`` times the reference once at that size).
Similarity compares the blocked kernel with one full-matrix product at 2,000 bullets.
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "2")

from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from combee_fast import native  # noqa: E402
from combee_fast.native.reference.scan import reference_final_states, reference_prefix_states  # noqa: E402
from combee_fast.native.reference.similarity import reference_pairs_above  # noqa: E402
from kernels import make_bullets, make_ops  # noqa: E402

Benchmark = Any  # pytest-benchmark's fixture type is not exported


@pytest.fixture(scope="module", autouse=True)
def compiled() -> None:
    native.warmup()


@pytest.fixture(scope="module")
def ops_50k() -> native.OpBatch:
    return make_ops(50_000, 2_000, seed=1)


@pytest.fixture(scope="module")
def ops_1m() -> native.OpBatch:
    return make_ops(1_000_000, 20_000, seed=2)


@pytest.mark.benchmark(group="scan-final-50k")
def test_final_states_kernel(benchmark: Benchmark, ops_50k: native.OpBatch) -> None:
    states = benchmark(native.final_states, ops_50k, 2_000)
    assert states.helpful.tolist() == [s.helpful for s in reference_final_states(ops_50k, 2_000)]


@pytest.mark.benchmark(group="scan-final-50k")
def test_final_states_reference(benchmark: Benchmark, ops_50k: native.OpBatch) -> None:
    benchmark.pedantic(reference_final_states, (ops_50k, 2_000), rounds=3)


@pytest.mark.benchmark(group="scan-prefix-50k")
def test_prefix_states_kernel(benchmark: Benchmark, ops_50k: native.OpBatch) -> None:
    prefix = benchmark(native.prefix_states, ops_50k, 2_000)
    assert prefix.accepted.tolist() == reference_prefix_states(ops_50k, 2_000)[1]


@pytest.mark.benchmark(group="scan-prefix-50k")
def test_prefix_states_reference(benchmark: Benchmark, ops_50k: native.OpBatch) -> None:
    benchmark.pedantic(reference_prefix_states, (ops_50k, 2_000), rounds=3)


@pytest.mark.benchmark(group="scan-1M")
def test_final_states_1m(benchmark: Benchmark, ops_1m: native.OpBatch) -> None:
    benchmark(native.final_states, ops_1m, 20_000)


@pytest.mark.benchmark(group="scan-1M")
def test_prefix_states_1m(benchmark: Benchmark, ops_1m: native.OpBatch) -> None:
    benchmark(native.prefix_states, ops_1m, 20_000)


@pytest.fixture(scope="module")
def offset_values() -> np.ndarray:
    return 1e9 + np.random.default_rng(3).standard_normal(10_000_000)


@pytest.mark.benchmark(group="variance-10M")
def test_moments_kernel(benchmark: Benchmark, offset_values: np.ndarray) -> None:
    result = benchmark(native.moments, offset_values)
    exact = np.var(offset_values - 1e9)
    assert abs(result.variance() - exact) / exact < 1e-12


@pytest.mark.benchmark(group="variance-10M")
def test_numpy_var(benchmark: Benchmark, offset_values: np.ndarray) -> None:
    benchmark(np.var, offset_values)


@pytest.fixture(scope="module")
def vectors_2k() -> np.ndarray:
    return native.HashingEmbedder().embed(make_bullets(2_000, seed=4))


@pytest.mark.benchmark(group="similarity-2k")
def test_pairs_above_blocked(benchmark: Benchmark, vectors_2k: np.ndarray) -> None:
    pairs = benchmark(native.pairs_above, vectors_2k, 0.9, max_block_bytes=1 << 20)
    assert len(pairs) == len(reference_pairs_above(vectors_2k, 0.9))


@pytest.mark.benchmark(group="similarity-2k")
def test_pairs_above_full_matrix(benchmark: Benchmark, vectors_2k: np.ndarray) -> None:
    benchmark.pedantic(reference_pairs_above, (vectors_2k, 0.9), rounds=2)
