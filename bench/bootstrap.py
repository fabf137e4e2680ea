"""Figure for the bootstrap kernels, measured side by side with the plain-Python reference.

    NUMBA_NUM_THREADS=2 python bench/bootstrap.py [--resamples 10000] [--examples 300]

A paired bootstrap of two methods' per-example scores (0/1, accuracy ~0.8 and ~0.75) with
10,000 resamples over 300 examples, as a verify report computes per cell. The kernel time is the
best of 5 calls after warm-up (all threads, and one thread); the reference
(``tests/native/reference/bootstrap.py``) runs once on the same scores, and both must give the
same interval. Prints as its last line::

    bootstrap_ms=<kernel ms> bootstrap_1t_ms=<one thread ms> reference_s=<reference s> speedup=<x>
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "2")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402

from combee_fast import native  # noqa: E402
from combee_fast.native.reference.bootstrap import reference_paired  # noqa: E402


def best_of(call, repeats: int = 5) -> float:  # type: ignore[no-untyped-def]
    """Fastest wall time of ``repeats`` calls, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--examples", type=int, default=300)
    args = parser.parse_args()
    print(f"threads={numba.get_num_threads()} load_average={os.getloadavg()}")
    native.warmup()
    rng = np.random.default_rng(0)
    a = (rng.random(args.examples) < 0.8).astype(float)
    b = (rng.random(args.examples) < 0.75).astype(float)
    kernel_s = best_of(lambda: native.paired_bootstrap(a, b, resamples=args.resamples, seed=1))
    serial_s = best_of(lambda: native.paired_bootstrap(a, b, resamples=args.resamples, seed=1, chunks=1))
    got = native.paired_bootstrap(a, b, resamples=args.resamples, seed=1)
    start = time.perf_counter()
    difference, lower, upper, _ = reference_paired(a.tolist(), b.tolist(), args.resamples, 1, got.level)
    reference_s = time.perf_counter() - start
    assert abs(got.lower - lower) < 1e-12 and abs(got.upper - upper) < 1e-12, "kernel and reference disagree"
    print(f"paired bootstrap, {args.resamples} resamples x {args.examples} examples: difference {difference:+.4f} "
          f"[{lower:+.4f}, {upper:+.4f}] at {got.level:.0%}; kernel {kernel_s * 1e3:.2f} ms "
          f"(one thread {serial_s * 1e3:.2f} ms), python reference (once) {reference_s:.2f} s")
    print(f"bootstrap_ms={kernel_s * 1e3:.2f} bootstrap_1t_ms={serial_s * 1e3:.2f} reference_s={reference_s:.2f} "
          f"speedup={reference_s / kernel_s:.0f}")


if __name__ == "__main__":
    main()
