"""Numba kernels, imported as ``combee_fast.native``. Nothing compiles at import.

Importing this package does not even import Numba: the public names below load their module
on first access. Kernels compile (or load from Numba's on-disk cache) on their first call, or
all at once with :func:`warmup`.

* :mod:`.scan`: merge playbook op logs per bullet (final and every prefix state).
* :mod:`.stats`: mean/variance with a parallel merge, Beta-posterior rates, group variance,
  latency quantiles.
* :mod:`.bootstrap`: percentile bootstrap interval of a mean, and the per-example paired
  bootstrap of the difference of two methods' mean scores (seeded, thread-count independent).
* :mod:`.proportion`: the exact (Clopper-Pearson) interval of a success rate, and two methods
  paired on the same rows (the difference with an interval that keeps its coverage at any n, and
  the exact sign test).
* :mod:`.similarity`: n-gram hashing embedder, blocked all-pairs and top-k over unit vectors,
  near-duplicates and the retention measure.
* :mod:`.sequential`: anytime-valid confidence sequences (empirical Bernstein) of a mean reward
  and of the difference of two versions, two-sample or paired, checked after every reward.

Who calls which kernel:

* ``prefix_states``: :func:`combee_fast.ace.playbook.deltalog.replay` (every version of a run from its
  ``deltas.jsonl``); ``final_states``: :func:`combee_fast.ace.playbook.deltalog.final_bullets`.
* ``near_duplicates`` (``pairs_above``): :func:`combee_fast.combee.reduce.partition_proposals`,
  the topic split of the reduce.
* ``retention`` (``top_k``): :func:`combee_fast.run.batch_plans.step_retention`, the controller's
  quality guard.
* :mod:`.bootstrap`: :mod:`combee_fast.verify.verdict` (``combee verify``: the
  interval of each cell's paired difference to the serial baseline) and
  :mod:`combee_fast.verify.diagnose` (``combee diagnose``: the plateau and above-empty tests).
* ``moments``, ``beta_rates``: :func:`combee_fast.run.step_signals.reward_statistics`, the reward
  mean, variance and Beta posterior of success the live planner reads every step.
* ``group_moments``, ``latency_quantiles``: :meth:`combee_fast.combee.latency_curve.LatencyCurve.summary`,
  per-in-flight-level latency and P50/P95 in every decision of the live planner.
* ``near_duplicates`` also: :func:`combee_fast.run.step_signals.distinct_count`, the planner's
  diversity alarm.
* :mod:`.proportion`: every score shown with its interval (``report.md``, ``combee eval``, the
  demo, ``verify``'s and ``diagnose``'s accuracies) and ``combee compare --paired``.
* :mod:`.sequential`: :mod:`combee_fast.embedded.release` (the release gate: each candidate
  version against the incumbent after every reward, and every version's reward interval).

:mod:`.reference` holds a plain-Python reference of each kernel (what it computes, slowly): the
tests check the kernels against them and ``bench/kernels.py`` and ``bench/bootstrap.py`` time
the kernels against them.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "scan": (
        "ADD",
        "UPDATE",
        "REMOVE",
        "TAG",
        "KIND_NAMES",
        "OpBatch",
        "SlotStates",
        "PrefixStates",
        "final_states",
        "prefix_states",
    ),
    "stats": (
        "Moments",
        "moments",
        "merge_moments",
        "BetaRates",
        "beta_rates",
        "GroupMoments",
        "group_moments",
        "LatencyQuantiles",
        "latency_quantiles",
    ),
    "bootstrap": (
        "MeanInterval",
        "PairedDifference",
        "bootstrap_means",
        "mean_interval",
        "paired_bootstrap",
    ),
    "proportion": (
        "ScoreInterval",
        "PairedComparison",
        "clopper_pearson",
        "score_interval",
        "paired_comparison",
        "sign_test",
    ),
    "sequential": (
        "ArmInterval",
        "Crossing",
        "confidence_sequence",
        "first_crossing",
    ),
    "similarity": (
        "Embedder",
        "HashingEmbedder",
        "Pairs",
        "Neighbours",
        "pairs_above",
        "top_k",
        "near_duplicates",
        "retention",
    ),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF) + ["warmup"]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def warmup() -> None:
    """Compile, or load from Numba's cache, every kernel for the dtypes the public API uses.

    Call it once at start-up, off the event loop: the first time on a machine it compiles
    for tens of seconds (24 s on the 2-core development machine), later it loads Numba's disk
    cache in about half a second. Afterwards no call compiles.
    """
    for module in _EXPORTS:
        importlib.import_module(f"{__name__}.{module}").warmup()
