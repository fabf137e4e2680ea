"""The user's metric call, in each shape ``optimize`` takes it, as one thing the search awaits.

A *metric call* grades one candidate on one row: ``await call(candidate, example, row)`` gives
a :class:`Scored`: the score, the candidate's output, and the *reflective records* the
reflection reads, per component (what gepa's adapters call the reflective dataset: a few
JSON-serializable fields per row). The shapes:

- :class:`AdapterMetric`: a ``GEPAAdapter`` of the ``gepa`` package, duck-typed (no import of
  gepa): ``evaluate([row], candidate, capture_traces=True)``, then
  ``make_reflective_dataset(candidate, batch, [name])`` for each component (gepa's default adapter
  takes one component at a time); the records are the adapter's own.
- :class:`EvaluatorMetric`: ``evaluator(candidate, row) -> score`` or ``(score, feedback)``
  (gepa's ``optimize_anything`` shape: ``feedback`` a string or a dict of side information); the
  candidate is passed as a plain string when the seed was one.
- :class:`BatchMetric`: ``batch_evaluator(candidate, rows) -> [score or (score, feedback), ...]``
  for code that must not run twice at once (MLflow's ``eval_fn`` is documented as not
  thread-safe) but grades many rows in one call: the rows of one candidate that wait together are
  handed over in one call, one call at a time.
- :class:`TaskLmMetric`: ``task_lm(messages) -> text`` (a callable, gepa's default adapter's
  shape: the candidate's text as the system message, the row's text as the user's) graded by
  ``metric(row, text) -> score`` or ``(score, feedback)``.
- :class:`EndpointTaskMetric`: the same with ``task_lm`` an endpoint: the message goes out as
  GEPA's solver role through the engine's client (retried, counted, priced, traced), the metric
  grades the reply's text.

The user's code runs on :class:`~combee_fast.optimizing.user_code.UserCode` (threads, or awaited
when async). A record of ours is ``{"input", "output" (when there is one), "score",
"feedback"}``, an evaluator's dict of side information taking ``feedback``'s place. Anything
the user's code raises, or a score that is not a finite number, propagates; the caller names the
row (:class:`~combee_fast.optimizing.calls.MetricCalls`).
"""

from __future__ import annotations

import asyncio
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import orjson

from combee_fast.endpoint.calls import ChatResult
from combee_fast.gepa.calls import SOLVER_ROLE
from combee_fast.gepa.candidate import Candidate
from combee_fast.optimizing.lm_server import reply_text
from combee_fast.optimizing.row_forms import row_json, row_text
from combee_fast.optimizing.user_code import UserCode
from combee_fast.roles.calls import RoleCalls
from combee_fast.schema import CallError, Example, Message, Usage

Records = dict[str, list[dict[str, Any]]]
"""Reflective records by component name."""


class Scored(NamedTuple):
    """One metric call's outcome: ``score``, the candidate's ``output`` (None: not known), the
    reflective ``records`` per component; ``usage`` and ``error``: the model call it made
    through the engine (None: the user's code alone, which the caller times)."""

    score: float
    output: str | None
    records: Records
    usage: Usage | None = None
    error: CallError | None = None


class MetricCall(Protocol):
    """Grades a candidate on a row (module docstring); ``what`` names the user's code in errors."""

    what: str

    async def __call__(self, candidate: Candidate, example: Example, row: Any) -> Scored: ...


def checked_score(value: Any) -> float:
    """``value`` as a score: a real, finite number (``ValueError`` saying what it is otherwise)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"the score must be a finite number, got {value!r}")
    return float(value)


def graded(value: Any) -> tuple[float, Any]:
    """A metric's return value as ``(score, feedback)``: a score alone, or a pair."""
    if isinstance(value, tuple) and len(value) == 2:
        return checked_score(value[0]), value[1]
    return checked_score(value), None


def record(row: Any, output: str | None, score: float, feedback: Any) -> dict[str, Any]:
    """Our reflective record of one row (module docstring)."""
    found: dict[str, Any] = {"input": row_text(row)}
    if output is not None:
        found["output"] = output
    found["score"] = score
    if isinstance(feedback, Mapping):
        found.update({str(key): value for key, value in feedback.items()})
    elif feedback is not None:
        found["feedback"] = str(feedback)
    return found


def every_component(candidate: Candidate, records: list[dict[str, Any]]) -> Records:
    """The same records for each of ``candidate``'s components."""
    return {name: records for name in candidate.names()}


def output_text(output: Any) -> str:
    """An adapter's per-row output as text: a string as it is, anything else as JSON."""
    return output if isinstance(output, str) else row_json(output).decode()


class AdapterMetric:
    """A gepa ``GEPAAdapter``'s ``evaluate`` and ``make_reflective_dataset`` (module docstring)."""

    what = "adapter"

    def __init__(self, adapter: Any, code: UserCode) -> None:
        for method in ("evaluate", "make_reflective_dataset"):
            if not callable(getattr(adapter, method, None)):
                raise TypeError(f"optimize: adapter {type(adapter).__name__} has no {method}() (a GEPAAdapter has "
                                "evaluate and make_reflective_dataset)")
        self.adapter = adapter
        self.code = code

    async def __call__(self, candidate: Candidate, example: Example, row: Any) -> Scored:
        components = dict(candidate.components)
        batch = await self.code.run(self.adapter.evaluate, [row], components, True)
        scores, outputs = list(batch.scores), list(batch.outputs)
        if len(scores) != 1 or len(outputs) != 1:
            raise ValueError(f"evaluate() of one row returned {len(scores)} scores and {len(outputs)} outputs")
        records = await self.code.run(self._records, components, batch)
        return Scored(checked_score(scores[0]), output_text(outputs[0]), records)

    def _records(self, components: dict[str, str], batch: Any) -> Records:
        found: Records = {}
        for name in components:
            dataset = self.adapter.make_reflective_dataset(components, batch, [name])
            found[name] = [dict(entry) for entry in dataset.get(name, ())]
        return found


class EvaluatorMetric:
    """``evaluator(candidate, row)`` (module docstring); ``plain``: the candidate goes as its one
    component's text (the seed was a string)."""

    what = "evaluator"

    def __init__(self, evaluator: Callable[..., Any], code: UserCode, *, plain: bool) -> None:
        self.evaluator = evaluator
        self.code = code
        self.plain = plain

    async def __call__(self, candidate: Candidate, example: Example, row: Any) -> Scored:
        given: Any = candidate.render() if self.plain else dict(candidate.components)
        score, feedback = graded(await self.code.run(self.evaluator, given, row))
        return Scored(score, None, every_component(candidate, [record(row, None, score, feedback)]))


class BatchMetric:
    """``batch_evaluator(candidate, rows)`` (module docstring), never two calls at once.

    A row's call waits its turn; when it gets it, every row of the same candidate waiting by then
    (a grading's rows arrive together) goes in one call, and each of their calls takes its own
    score. Calls for other candidates wait for the next turn."""

    what = "batch_evaluator"

    def __init__(self, batch_evaluator: Callable[..., Any], code: UserCode, *, plain: bool) -> None:
        self.batch_evaluator = batch_evaluator
        self.code = code
        self.plain = plain
        self._waiting: dict[tuple[tuple[str, str], ...], list[tuple[Any, asyncio.Future[Scored]]]] = {}
        self._turn = asyncio.Lock()

    async def __call__(self, candidate: Candidate, example: Example, row: Any) -> Scored:
        key = tuple(sorted(candidate.components.items()))
        mine: asyncio.Future[Scored] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append((row, mine))
        await asyncio.sleep(0)  # the grading's other rows join the queue first
        async with self._turn:
            if not mine.done():
                await self._grade(candidate, self._waiting.pop(key))
        return mine.result()

    async def _grade(self, candidate: Candidate, batch: list[tuple[Any, asyncio.Future[Scored]]]) -> None:
        given: Any = candidate.render() if self.plain else dict(candidate.components)
        rows = [row for row, _ in batch]
        try:
            values = list(await self.code.run(self.batch_evaluator, given, rows))
            if len(values) != len(rows):
                raise ValueError(f"batch_evaluator returned {len(values)} results for {len(rows)} rows")
            for (row, future), value in zip(batch, values):
                score, feedback = graded(value)
                future.set_result(Scored(score, None, every_component(candidate, [record(row, None, score, feedback)])))
        except Exception as exc:  # every row of the call fails alike; each caller names its own
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)



def task_messages(candidate: Candidate, row: Any) -> list[dict[str, str]]:
    """What ``task_lm`` is sent for ``row``: the candidate as the system message, the row's text as
    the user's (gepa's default adapter's messages)."""
    return [{"role": "system", "content": candidate.render()}, {"role": "user", "content": row_text(row)}]


class TaskLmMetric:
    """``metric(row, task_lm(messages))`` (module docstring), one thread hop for both."""

    what = "task_lm or metric"

    def __init__(self, task_lm: Callable[[Sequence[Mapping[str, str]]], Any], metric: Callable[[Any, str], Any],
                 code: UserCode) -> None:
        self.task_lm = task_lm
        self.metric = metric
        self.code = code

    def _graded(self, messages: list[dict[str, str]], row: Any) -> tuple[str, float, Any]:
        text = reply_text(self.task_lm(messages))
        return (text, *graded(self.metric(row, text)))

    async def __call__(self, candidate: Candidate, example: Example, row: Any) -> Scored:
        text, score, feedback = await self.code.run(self._graded, task_messages(candidate, row), row)
        return Scored(score, text, every_component(candidate, [record(row, text, score, feedback)]))


class EndpointTaskMetric:
    """The task call through the engine's solver role on ``calls``, graded by ``metric`` (module
    docstring). A failed call scores 0 and carries its error, as a failed solve does."""

    what = "metric"

    def __init__(self, calls: RoleCalls, metric: Callable[[Any, str], Any], code: UserCode) -> None:
        self.calls = calls
        self.metric = metric
        self.code = code

    async def __call__(self, candidate: Candidate, example: Example, row: Any) -> Scored:
        messages = [Message(m["role"], m["content"]) for m in task_messages(candidate, row)]
        result: ChatResult = await self.calls.send(self.calls.request(SOLVER_ROLE, messages, example.id))
        if result.error is not None or result.text is None:
            error = result.error or CallError("no_answer", "the task call gave no text")
            return Scored(0.0, None, every_component(candidate, [record(row, None, 0.0, error.message)]),
                          result.usage, error)
        score, feedback = graded(await self.code.run(self.metric, row, result.text))
        return Scored(score, result.text, every_component(candidate, [record(row, result.text, score, feedback)]),
                      result.usage)


def records_json(records: Records) -> str:
    """``records`` as the JSON text a graded answer keeps them in (its ``feedback``)."""
    return orjson.dumps(records, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
