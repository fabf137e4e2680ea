"""Importing compiles nothing; warmup() compiles everything the API calls; then calls are fast.

Each check runs in a fresh interpreter so that no other test has compiled anything first.
"""

from __future__ import annotations

import pytest

import json
import subprocess
import sys

KERNEL_MODULES = ("scan", "stats", "similarity", "bootstrap", "sequential")


def run_python(code: str) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


COMPILED_SIGNATURES = f"""
def compiled_signatures():
    import importlib
    from numba.core.registry import CPUDispatcher
    counts = {{}}
    for module in {KERNEL_MODULES!r}:
        namespace = vars(importlib.import_module("combee_fast.native." + module))
        for name, value in namespace.items():
            if isinstance(value, CPUDispatcher):
                counts[module + "." + name] = len(value.signatures)
    return counts
"""


def test_importing_the_package_does_not_import_numba() -> None:
    found = run_python(
        "import json, sys\n"
        "import combee_fast, combee_fast.native\n"
        'print(json.dumps({"numba": "numba" in sys.modules}))\n'
    )
    assert found == {"numba": False}


def test_importing_kernel_modules_compiles_nothing() -> None:
    counts = run_python(COMPILED_SIGNATURES + "\nimport json\nprint(json.dumps(compiled_signatures()))\n")
    assert len(counts) >= 15  # the kernels were found ...
    assert {name: n for name, n in counts.items() if n} == {}  # ... and none is compiled


@pytest.mark.slow
def test_after_warmup_no_call_compiles_and_small_calls_take_under_a_millisecond() -> None:
    report = run_python(
        COMPILED_SIGNATURES
        + """
import json, time
import numpy as np
import combee_fast.native as native

native.warmup()
from combee_fast.native import sequential
state = sequential.new_state()
before = compiled_signatures()
ops = native.OpBatch.from_arrays([0, 1, 1], [native.ADD, native.TAG, native.REMOVE], [0, 1, 2], [0, 2, 0], [0, 1, 0], [0, -1, -1])
vectors = native.HashingEmbedder().embed(["check the units", "check units", "retry later"])
calls = {
    "final_states": lambda: native.final_states(ops, 2),
    "prefix_states": lambda: native.prefix_states(ops, 2).state_after(2),
    "moments": lambda: native.moments(np.arange(5.0)),
    "beta_rates": lambda: native.beta_rates(np.array([3]), np.array([1])),
    "group_moments": lambda: native.group_moments(np.arange(4.0), np.array([0, 1, 0, 1]), 2),
    "latency_quantiles": lambda: native.latency_quantiles(np.arange(5.0)),
    "pairs_above": lambda: native.pairs_above(vectors, 0.5),
    "top_k": lambda: native.top_k(vectors, 1),
    "embed": lambda: native.HashingEmbedder().embed(["one more text"]),
    "mean_interval": lambda: native.mean_interval(np.arange(5.0), resamples=50),
    "paired_bootstrap": lambda: native.paired_bootstrap(np.arange(5.0), np.ones(5), resamples=50),
    "confidence_sequence": lambda: native.confidence_sequence(np.ones(5), alpha=0.05),
    "first_crossing": lambda: native.first_crossing(sequential.new_state(), np.array([0, 1]), np.array([1.0, 0.0]),
                                                    0.05, False, 0.0, 0.5),
    "step": lambda: sequential.step(state, sequential.CANDIDATE, 1.0, 0.05, False),
}
times = {}
for name, call in calls.items():
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        call()
        runs.append(time.perf_counter() - start)
    times[name] = runs
# Inputs big enough for the parallel kernels (untimed): these must not compile either.
big = native.OpBatch.from_arrays(np.arange(40_000) % 7, np.full(40_000, native.TAG), np.arange(40_000), np.ones(40_000, int), np.zeros(40_000, int), np.full(40_000, -1))
native.final_states(big, 7)
native.prefix_states(big, 7)
native.moments(np.arange(100_000.0))
native.beta_rates(np.arange(100), np.arange(100))
many = native.HashingEmbedder().embed([f"bullet number {i} says check the units" for i in range(6_000)])
native.pairs_above(many[:800], 0.9)
native.top_k(many[:800], 3)
native.paired_bootstrap(np.arange(300.0), np.arange(300), resamples=2_000)
native.mean_interval(np.arange(300), resamples=2_000)
after = compiled_signatures()
print(json.dumps({"new": {k: after[k] - before[k] for k in after if after[k] != before[k]}, "times": times}))
"""
    )
    assert report["new"] == {}, f"calls after warmup compiled new signatures: {report['new']}"
    times: dict[str, list[float]] = report["times"]  # type: ignore[assignment]
    slow = {name: runs for name, runs in times.items() if min(runs) >= 1e-3}
    assert slow == {}, f"best of 3 calls took >= 1 ms: {slow}"


def test_every_exported_name_resolves_lazily() -> None:
    found = run_python(
        "import json\n"
        "import combee_fast.native as native\n"
        "missing = [name for name in native.__all__ if getattr(native, name, None) is None]\n"
        'print(json.dumps({"missing": missing, "count": len(native.__all__)}))\n'
    )
    assert found["missing"] == [] and found["count"] >= 25
