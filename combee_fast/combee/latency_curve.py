"""The endpoint's latency as a function of requests in flight, learned from request timings.

Each finished call is one :class:`CallSample`: how many requests were in flight while it ran
(derived from the step's schedule, so it is the same under the replay cache), its prompt and
completion tokens, and its latency. :class:`LatencyCurve` fits

    latency = b0 + b_prompt * prompt_tokens + b_completion * completion_tokens
              + b_load * completion_tokens * (in_flight - 1) + b_wait * (in_flight - 1)

by non-negative least squares over the last ``history`` calls (a bounded window), a call one step
older weighing ``decay`` times as much (so a changed endpoint shows within a step or two). ``b_load`` and
``b_wait`` are the hardware class: ~0 for an endpoint without a visible load effect (a hosted API,
a flat yardstick); ``b_load`` > 0 for a GPU whose decode step slows as its batch grows, ``b_wait``
> 0 for one whose slots are full (requests queue). Prefill cost is ``b_prompt``, so a growing
playbook shows as slower calls.

Per in-flight bin moments (the native ``group_moments`` kernel) and the latency quantiles
(``latency_quantiles``) summarise what the fit saw, for the decision log.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence

import msgspec
import numpy as np

from combee_fast.engine.kept import capture, restore_into


class CallSample(msgspec.Struct, frozen=True):
    """One call: mean requests in flight during it (itself included), its tokens, its seconds."""

    in_flight: float
    prompt_tokens: int
    completion_tokens: int
    seconds: float


class CurveState(msgspec.Struct, frozen=True):
    """What a checkpoint keeps of a :class:`LatencyCurve` (its samples and fit)."""

    _samples: tuple[CallSample, ...]
    _steps: tuple[int, ...]
    _step: int
    coef: tuple[float, ...] | None
    max_in_flight: float


class LatencyCurve:
    """A bounded window of :class:`CallSample` and the least-squares fit over it."""

    def __init__(self, history: int, decay: float) -> None:
        self._samples: deque[CallSample] = deque(maxlen=history)
        self._steps: deque[int] = deque(maxlen=history)  # the step each sample came from
        self._decay = decay
        self._step = 0
        self.coef: np.ndarray | None = None
        self.max_in_flight = 0.0

    def __len__(self) -> int:
        return len(self._samples)

    def state(self) -> CurveState:
        """The samples and the fit, for a checkpoint."""
        coef = None if self.coef is None else tuple(float(c) for c in self.coef)
        return capture(self, CurveState, coef=coef)

    def restore(self, state: CurveState) -> None:
        """Continue from :meth:`state` (on a curve of the same ``history`` and ``decay``)."""
        restore_into(self, state, skip=("coef",))
        self.coef = None if state.coef is None else np.array(state.coef, dtype=np.float64)

    def reset(self) -> None:
        """Forget every sample (the endpoint changed)."""
        self._samples.clear()
        self._steps.clear()
        self.coef = None
        self.max_in_flight = 0.0

    def add(self, samples: Iterable[CallSample]) -> None:
        """Add a step's calls and re-fit."""
        self._step += 1
        for sample in samples:
            if sample.seconds > 0 and math.isfinite(sample.seconds):
                self._samples.append(sample)
                self._steps.append(self._step)
        if self._samples:
            self.max_in_flight = max(s.in_flight for s in self._samples)
        self.coef = self._fit() if len(self._samples) >= 4 else None

    def _fit(self) -> np.ndarray:
        k = np.array([s.in_flight for s in self._samples], dtype=np.float64)
        prompt = np.array([s.prompt_tokens for s in self._samples], dtype=np.float64)
        completion = np.array([s.completion_tokens for s in self._samples], dtype=np.float64)
        y = np.array([s.seconds for s in self._samples], dtype=np.float64)
        # Fitted per completion token (each row divided by its completion tokens), so that one
        # long call cannot outweigh the load signal of many short ones.
        per = 1.0 / np.maximum(completion, 1.0)
        design = np.column_stack([per, prompt * per, np.ones_like(y), k - 1.0, (k - 1.0) * per])
        age = self._step - np.array(self._steps, dtype=np.float64)
        root_weight = np.sqrt(self._decay**age)
        return _nonnegative_least_squares(design * root_weight[:, None], y * per * root_weight)

    def predict(self, in_flight: float, prompt_tokens: float, completion_tokens: float) -> float:
        """Seconds of a call of this size sent with ``in_flight`` requests in flight."""
        if self.coef is None:
            raise ValueError("LatencyCurve.predict: fewer than 4 calls measured")
        b0, bp, bc, bk, bw = self.coef
        others = max(in_flight - 1.0, 0.0)
        return float(b0 + bp * prompt_tokens + bc * completion_tokens + (bk * completion_tokens + bw) * others)

    def fastest_per_token(self) -> float:
        """The 5th percentile of seconds per completion token: what a call costs when it meets no
        queue (a floor for the unloaded latency, which a fit over loaded calls cannot see)."""
        if not self._samples:
            return 0.0
        return float(np.quantile([s.seconds / max(s.completion_tokens, 1) for s in self._samples], 0.05))

    def load_factor(self, in_flight: float, prompt_tokens: float, completion_tokens: float) -> float:
        """How much slower a call is at ``in_flight`` than alone (1: no load effect)."""
        alone = self.predict(1, prompt_tokens, completion_tokens)
        return self.predict(in_flight, prompt_tokens, completion_tokens) / alone if alone > 0 else 1.0

    def summary(self) -> dict[str, float]:
        """The fit and the latency distribution, for the decision log (native kernels)."""
        from combee_fast.native.stats import group_moments, latency_quantiles

        if not self._samples:
            return {}
        seconds = np.array([s.seconds for s in self._samples], dtype=np.float64)
        quantiles = latency_quantiles(seconds)
        out = {"calls_seen": float(len(self._samples)), "latency_p50": quantiles.p50,
               "latency_p95": quantiles.p95, "max_in_flight_seen": float(self.max_in_flight)}
        # Mean seconds per completion token in four in-flight bins (1, 2-8, 9-64, 65+).
        per_token = np.array([s.seconds / max(s.completion_tokens, 1) for s in self._samples])
        bins = np.searchsorted(np.array([2, 9, 65]), [s.in_flight for s in self._samples], side="right")
        grouped = group_moments(per_token, bins, 4)
        for index, label in enumerate(("1", "2_8", "9_64", "65_up")):
            if grouped.count[index]:
                out[f"s_per_token_inflight_{label}"] = float(grouped.mean[index])
        if self.coef is not None:
            out.update(zip(("fit_base_s", "fit_s_per_prompt_token", "fit_s_per_token", "fit_s_per_token_per_inflight",
                            "fit_wait_s_per_inflight"), map(float, self.coef)))
        return out


def _nonnegative_least_squares(design: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``argmin |design @ x - y|`` over ``x >= 0``: every term is a cost, so a negative estimate is
    noise or a confounded column, not a speed-up. Exhaustive over the subsets of columns (few)."""
    columns = design.shape[1]
    best, best_residual = np.zeros(columns), float(y @ y)
    for mask in range(1, 1 << columns):
        chosen = [c for c in range(columns) if mask >> c & 1]
        x, *_ = np.linalg.lstsq(design[:, chosen], y, rcond=None)
        if np.any(x < 0):
            continue
        residual = float(np.sum((design[:, chosen] @ x - y) ** 2))
        if residual < best_residual - 1e-12 * max(best_residual, 1.0):
            best, best_residual = np.zeros(columns), residual
            best[chosen] = x
    return best


def fit_line(points: Sequence[tuple[float, float]], decay: float) -> tuple[float, float] | None:
    """``(intercept, slope)``, both >= 0, of ``y`` against ``x`` by least squares, the last point
    weighing 1 and each earlier one ``decay`` times the next; None without two distinct ``x``.
    The planner fits a step's map seconds against its batch size with it."""
    if len({x for x, _ in points}) < 2:
        return None
    weights = [decay**age for age in range(len(points) - 1, -1, -1)]
    total = math.fsum(weights)
    mean_x = math.fsum(w * x for w, (x, _) in zip(weights, points)) / total
    mean_y = math.fsum(w * y for w, (_, y) in zip(weights, points)) / total
    sxx = math.fsum(w * (x - mean_x) ** 2 for w, (x, _) in zip(weights, points))
    slope = max(0.0, math.fsum(w * (x - mean_x) * (y - mean_y) for w, (x, y) in zip(weights, points)) / sxx)
    return max(mean_y - slope * mean_x, 0.0), slope
