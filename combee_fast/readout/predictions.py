"""What a run says of its endpoint's batching and of its planner's predictions: the ``batching``
object of ``summary.json`` (:func:`batching_summary`) and the section of ``report.md``
(:func:`batching_lines`).

Both read the start-up probe's curve (:class:`~combee_fast.endpoint.batching.BatchingCurve`) and
the ledger rows: each row holds the step seconds the batch plan predicted for the step
(``predicted_seconds``) beside the ones it measured (``sim_seconds``). ``predicted_vs_measured`` is
the median over the steps with a prediction of predicted / measured: 1 is a planner whose model of
the endpoint holds; ``null``, with the reason, when no step had one.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import msgspec

from combee_fast.combee.planner import NO_GO
from combee_fast.endpoint.batching import BatchingCurve
from combee_fast.record.ledger import LedgerRow

STEPS_SHOWN = 20
"""Steps of the predicted-against-measured table on the page (the latest; the ledger has every one)."""

NO_PREDICTION = ("no step had a prediction: the live planner predicts a step's seconds once it has measured "
                 "one (a fixed or replayed batch size predicts none)")


def predicted_vs_measured(rows: Sequence[LedgerRow]) -> tuple[float | None, str]:
    """The median of predicted / measured step seconds over the rows with a prediction, and the
    reason when there is none (None, why)."""
    ratios = [r.predicted_seconds / r.sim_seconds for r in rows
              if r.predicted_seconds is not None and r.sim_seconds > 0]
    if not ratios:
        return None, NO_PREDICTION
    return statistics.median(ratios), ""


def batching_summary(curve: BatchingCurve | None, rows: Sequence[LedgerRow]) -> dict[str, Any]:
    """``summary.json``'s ``batching``: the probe's points, best concurrency and gain (None without
    points), why it stopped, ``predicted_vs_measured`` (with ``predicted_vs_measured_reason``
    when it is None) over ``steps_predicted`` steps, and ``no_go``: the batch planner's reason
    when it found that parallelism cannot pay here (None: it did not)."""
    curve = curve or BatchingCurve.of((), stopped="off", why="not probed: the run was not told of a probe")
    ratio, reason = predicted_vs_measured(rows)
    found = bool(curve.points)
    summary: dict[str, Any] = {
        "points": msgspec.to_builtins(curve.points), "best_concurrency": curve.best_concurrency if found else None,
        "gain": round(curve.gain, 4) if found else None, "stopped": curve.stopped, "why": curve.why,
        "predicted_vs_measured": None if ratio is None else round(ratio, 4),
        "steps_predicted": sum(r.predicted_seconds is not None for r in rows),
        "no_go": next((r.batch_reason for r in rows if r.batch_reason.startswith(NO_GO)), None),
    }
    if ratio is None:
        summary["predicted_vs_measured_reason"] = reason
    return summary


def batching_lines(curve: BatchingCurve | None, rows: Sequence[LedgerRow]) -> list[str]:
    """The page's ``Batching`` section: the probe's curve as a table with its gain, and the latest
    :data:`STEPS_SHOWN` steps' predicted against measured seconds."""
    lines = ["## Batching", ""]
    if curve is None or not curve.points:
        lines += [f"Start-up probe: {curve.why if curve is not None and curve.why else 'none'}.", ""]
    else:
        lines += ["Start-up probe of the rollout role's endpoint (requests sent at once):", "",
                  "| concurrency | latency s | tokens/s |", "|---:|---:|---:|"]
        lines += [f"| {p.concurrency} | {p.latency_s:.3f} | {p.tokens_per_s:.1f} |" for p in curve.points]
        lines += ["", f"Gain {curve.gain:.2f}x at the best concurrency {curve.best_concurrency} "
                  f"(stopped: {curve.stopped}){'; ' + curve.why if curve.why else ''}.", ""]
    ratio, reason = predicted_vs_measured(rows)
    if ratio is None:
        return [*lines, f"Predicted against measured step seconds: {reason}.", ""]
    predicted = [r for r in rows if r.predicted_seconds is not None][-STEPS_SHOWN:]
    lines += [f"Predicted against measured step seconds: median ratio {ratio:.2f} (the latest {len(predicted)} "
              "steps with a prediction):", "", "| step | batch | predicted s | measured s |", "|---:|---:|---:|---:|"]
    lines += [f"| {r.step} | {r.batch_size} | {r.predicted_seconds:.2f} | {r.sim_seconds:.2f} |" for r in predicted]
    return [*lines, ""]
