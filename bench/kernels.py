"""Figures for the native kernels, each measured side by side with its baseline in one run.

    NUMBA_NUM_THREADS=2 python bench/kernels.py
    python bench/kernels.py --fraction 0.05     # a quick run: 5% of the ops, values and bullets

Prints what it measured, then as its last line::

    scan_speedup=<x> scan_mops=<final M ops/s> prefix_mops=<prefix M ops/s> var_vs_numpy=<ratio> sim_peak_mib=<n>

* delta scan: 1,000,000 ops over 20,000 bullet slots (84% TAG, 10% UPDATE, 5% ADD, 1% REMOVE);
  kernel times are the best of 5 runs; the pure-Python reference runs once on the same ops.
  Also printed (not in the last line): one-thread figures and a 2,000-slot playbook.
* variance: 10,000,000 float64 values 1e9 + N(0, 1); best of 5 for the kernel and numpy.var.
* similarity: 20,000 synthetic bullets embedded with the built-in hashing embedder (1024
  dims); all pairs with cosine >= 0.9 in blocks of 32 MiB; the peak is tracemalloc's peak
  while the pairs are computed (the 78 MiB input matrix exists before and is not counted).
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "2")

import argparse  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402

from combee_fast import native  # noqa: E402
from combee_fast.native.scan import ADD, REMOVE, TAG, UPDATE, OpBatch  # noqa: E402
from combee_fast.native.reference.scan import reference_final_states  # noqa: E402

N_OPS = 1_000_000
N_SLOTS = 20_000
N_VALUES = 10_000_000
N_BULLETS = 20_000


def make_ops(n_ops: int, n_slots: int, seed: int = 0) -> OpBatch:
    """A delta log in sequence order with a realistic mix of op kinds."""
    rng = np.random.default_rng(seed)
    kind = rng.choice([TAG, UPDATE, ADD, REMOVE], n_ops, p=[0.84, 0.10, 0.05, 0.01]).astype(np.int8)
    return OpBatch.from_arrays(
        rng.integers(0, n_slots, n_ops),
        kind,
        np.arange(n_ops),
        np.where(kind == TAG, rng.integers(0, 2, n_ops), 0),
        np.where(kind == TAG, rng.integers(0, 2, n_ops), 0),
        np.where(kind <= UPDATE, np.arange(n_ops), -1),
    )


def make_bullets(n: int, seed: int = 0) -> list[str]:
    """Playbook-like bullets from a made-up vocabulary; about 2% are near-duplicates."""
    rng = np.random.default_rng(seed)
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "de"]
    vocabulary = ["".join(rng.choice(syllables, rng.integers(1, 4))) for _ in range(800)]
    bullets: list[str] = []
    for _ in range(n):
        if bullets and rng.random() < 0.02:
            words = bullets[int(rng.integers(len(bullets)))].split()
            words[int(rng.integers(len(words)))] = str(rng.choice(vocabulary))
        else:
            words = list(rng.choice(vocabulary, rng.integers(8, 26)))
        bullets.append(" ".join(words))
    return bullets


def best_of(call: Callable[[], object], repeats: int = 5) -> float:
    """Fastest wall time of ``repeats`` calls, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description="the native kernels, each beside its baseline")
    parser.add_argument("--fraction", type=float, default=1.0,
                        help="scale the op, value and bullet counts by this (a quick run: 0.05)")
    fraction = parser.parse_args().fraction
    if not 0 < fraction <= 1:
        parser.error(f"--fraction must be in (0, 1], got {fraction}")
    n_ops, n_values, n_bullets = (max(1_000, int(n * fraction)) for n in (N_OPS, N_VALUES, N_BULLETS))
    print(f"threads={numba.get_num_threads()} load_average={os.getloadavg()}")
    native.warmup()

    ops = make_ops(n_ops, N_SLOTS)
    final_s = best_of(lambda: native.final_states(ops, N_SLOTS))
    prefix_s = best_of(lambda: native.prefix_states(ops, N_SLOTS))
    start = time.perf_counter()
    expected = reference_final_states(ops, N_SLOTS)
    reference_s = time.perf_counter() - start
    final = native.final_states(ops, N_SLOTS)
    assert final.helpful.tolist() == [s.helpful for s in expected], "kernel and reference disagree"
    print(f"scan: {n_ops} ops, {N_SLOTS} slots: final {final_s * 1e3:.2f} ms, prefix {prefix_s * 1e3:.2f} ms, "
          f"python reference (once) {reference_s:.2f} s")
    serial_final_s = best_of(lambda: native.final_states(ops, N_SLOTS, chunks=1))
    serial_prefix_s = best_of(lambda: native.prefix_states(ops, N_SLOTS, chunks=1))
    small_ops = make_ops(n_ops, 2_000)
    small_final_s = best_of(lambda: native.final_states(small_ops, 2_000))
    print(f"scan, one thread: final {n_ops / serial_final_s / 1e6:.1f} M ops/s, prefix {n_ops / serial_prefix_s / 1e6:.1f} M ops/s; "
          f"2,000 slots, all threads: final {n_ops / small_final_s / 1e6:.1f} M ops/s")

    values = 1e9 + np.random.default_rng(1).standard_normal(n_values)
    kernel_var_s = best_of(lambda: native.moments(values))
    numpy_var_s = best_of(lambda: np.var(values))
    serial_var_s = best_of(lambda: native.moments(values, chunks=1))
    exact = np.var(values - 1e9)
    error = abs(native.moments(values).variance() - exact) / exact
    print(f"variance: {n_values} values: kernel {kernel_var_s * 1e3:.2f} ms (one thread {serial_var_s * 1e3:.2f} ms), "
          f"numpy.var {numpy_var_s * 1e3:.2f} ms, relative error {error:.1e}")

    bullets = make_bullets(n_bullets)
    start = time.perf_counter()
    vectors = native.HashingEmbedder().embed(bullets)
    embed_s = time.perf_counter() - start
    tracemalloc.start()
    start = time.perf_counter()
    pairs = native.pairs_above(vectors, 0.9)
    pairs_s = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"similarity: {n_bullets} bullets x {vectors.shape[1]} dims ({vectors.nbytes / 2**20:.0f} MiB input): "
          f"embed {embed_s:.2f} s, pairs >= 0.9 {pairs_s:.2f} s, {len(pairs)} pairs, peak {peak / 2**20:.1f} MiB")

    print(
        f"scan_speedup={reference_s / final_s:.0f} scan_mops={n_ops / final_s / 1e6:.1f} "
        f"prefix_mops={n_ops / prefix_s / 1e6:.1f} var_vs_numpy={numpy_var_s / kernel_var_s:.3g} "
        f"sim_peak_mib={peak / 2**20:.1f}"
    )


if __name__ == "__main__":
    main()
