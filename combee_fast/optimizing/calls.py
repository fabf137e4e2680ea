"""GEPA's calls with the user's metric as the metric call: :class:`MetricCalls`; ACE's with it as
the generator: :class:`MetricAceCalls` (``combee-ace``).

The search and its evaluation (:mod:`combee_fast.gepa`) grade and reflect through
:class:`~combee_fast.gepa.calls.GepaCalls`; here a grading is the user's metric call
(:mod:`.metric`) on the row an example stands for, and a reflection reads the reflective records
that call kept for the component being rewritten.

- **solve**: one metric call. Its graded answer keeps the candidate's output as ``answer``, the
  score, and the records by component as JSON in ``feedback`` (what the reflection reads, and
  what a run's trajectories show); its usage is the model call it made through the engine, or
  else, as role ``gepa_solver`` (the role of GEPA's metric calls, counted in ``calls.json``), the
  wall seconds the user's code took (``latency_s``) and :data:`METRIC_CALL_SECONDS` as the
  seconds the search's schedule counts (``sim_latency_s``): the user's code takes a different
  time on every run, so its wall seconds would make a seed's decisions differ from run to run
  (:mod:`combee_fast.gepa.pipeline`, **Time.**). Whatever the user's code raises is a
  :class:`~combee_fast.errors.MetricError` naming the row: the run stops there, its checkpoint
  kept (``optimize(run_dir=...)`` resumes it).
- **propose**: our proposer's instructions (``gepa/prompts/proposer.txt``) over the records, one
  JSON object per line (``gepa/prompts/interop_proposer_user.txt``, the prompt the gepa interop
  sends), asked as free text (no ``response_format``: a reflection model of the user's may
  answer in its own format) and read leniently: our JSON's ``instruction``, else a fenced block, else the whole reply
  (:func:`~combee_fast.gepa.interop.rewrite_text`), so a reflection model that answers in
  GEPA's own format is understood too.
- **aggregate**: GEPA's own (:meth:`~combee_fast.gepa.calls.GepaCalls.aggregate`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import orjson

from combee_fast.ace.calls import AceCalls
from combee_fast.ace.roles import GENERATOR
from combee_fast.errors import ConfigError, MetricError
from combee_fast.gepa.calls import PROPOSER_ROLE, PROPOSER_SYSTEM_PROMPT, SOLVER_ROLE, GepaCalls, Rewrite
from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.interop import INTEROP_PROPOSER_USER_TEMPLATE, rewrite_text
from combee_fast.optimizing.metric import MetricCall, records_json
from combee_fast.optimizing.rows import RowsTask
from combee_fast.roles.base import fill
from combee_fast.roles.calls import RoleCalls
from combee_fast.schema import CallError, Example, GradedAnswer, Message, Rollout, Usage

METRIC_CALL_SECONDS = 1.0
"""The seconds every metric call of the user's code lasts in the search's schedule, whatever it
took (module docstring): a short model call's."""


def records_of(evaluation: GradedAnswer, component: str) -> list[dict[str, Any]]:
    """The reflective records ``evaluation`` keeps for ``component`` (none when it kept none)."""
    return list(orjson.loads(evaluation.feedback).get(component, ()))


async def metric_call(metric: MetricCall, rows: RowsTask, calls: RoleCalls, example: Example, candidate: Candidate,
                      *, role: str) -> GradedAnswer:
    """One metric call: ``candidate`` graded on ``example``'s row by the user's ``metric``,
    counted as a call of ``role``, lasting :data:`METRIC_CALL_SECONDS` in the schedule unless it
    was a model call of the engine's (module docstring)."""
    started = time.perf_counter()
    try:
        scored = await metric(candidate, example, rows.row(example))
    except Exception as exc:  # the user's code may fail in any way: the row named, the run stopped
        raise MetricError(f"optimize: the {metric.what} raised {type(exc).__name__}: {exc} (on "
                          f"{example.split} row {example.index})") from exc
    usage = scored.usage or Usage(role=role, latency_s=time.perf_counter() - started,
                                  sim_latency_s=METRIC_CALL_SECONDS)
    calls.note(role, scored.error, scored.output)
    return GradedAnswer(example, scored.output, scored.score, records_json(scored.records), usage, scored.error)


class MetricCalls(GepaCalls):
    """GEPA's calls on ``calls`` with ``metric`` grading candidates on the rows of ``task``
    (module docstring)."""

    def __init__(self, task: RowsTask, calls: RoleCalls, metric: MetricCall) -> None:
        super().__init__(task, calls)
        self.rows = task
        self.metric = metric

    async def solve_candidate(self, example: Example, candidate: Candidate) -> GradedAnswer:
        """One metric call: ``candidate`` graded on ``example``'s row by the user's metric."""
        return await metric_call(self.metric, self.rows, self.calls, example, candidate, role=SOLVER_ROLE)

    async def propose(
        self, current: str, evaluations: Sequence[GradedAnswer], *, seed_path: tuple[int | str, ...], component: str,
    ) -> Rewrite:
        """One reflection call over the records ``evaluations`` kept for ``component``."""
        lines = [orjson.dumps(entry, default=str).decode()
                 for evaluation in evaluations for entry in records_of(evaluation, component)]
        user = fill(INTEROP_PROPOSER_USER_TEMPLATE, instruction=current, examples="\n".join(lines))
        messages = (Message("system", PROPOSER_SYSTEM_PROMPT), Message("user", user))
        result = await self.calls.send(self.calls.request(PROPOSER_ROLE, messages, *seed_path))
        text = rewrite_text(result.text) if result.error is None and result.text else None
        error = result.error
        if error is None and text is None:
            error = CallError("no_answer", f"{PROPOSER_ROLE}: no instruction in the reply", raw=result.text)
        self.calls.note(PROPOSER_ROLE, error, result.text)
        return Rewrite(text, result.usage, error)


class MetricAceCalls(AceCalls):
    """ACE's calls on ``calls`` whose generator is the user's metric (``combee-ace``): a playbook's
    attempt at a row is the metric call on ``seed`` (one component) with the playbook's text after
    its own; the rollout's answer is the candidate's output and its feedback the records the metric
    kept, which ACE's reflector reads. ACE's reflector, curator and reducer are its own calls."""

    def __init__(self, task: RowsTask, calls: RoleCalls, metric: MetricCall, seed: Candidate) -> None:
        super().__init__(calls)
        if len(seed.components) != 1:
            raise ConfigError(f"optimize(method='combee-ace') learns a playbook for one component; the seed has "
                              f"{len(seed.components)}: {', '.join(seed.names())}")
        self.rows = task
        self.metric = metric
        self.seed = seed

    async def generate(self, example: Example, playbook_text: str, *, epoch: int | str, round_: int = 0,
                       previous: Rollout | None = None, feedback: str | None = None) -> Rollout:
        name = self.seed.names()[0]
        own = self.seed.components[name]
        candidate = Candidate({name: f"{own}\n\n{playbook_text}" if playbook_text.strip() else own})
        graded = await metric_call(self.metric, self.rows, self.calls, example, candidate, role=GENERATOR.key)
        return Rollout(example, round_, (), graded.answer, "", (), graded.score, graded.feedback, graded.usage,
                       graded.error)
