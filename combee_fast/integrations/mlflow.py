"""MLflow: a prompt optimizer for ``mlflow.genai.optimize_prompts``, and registry aliases that
follow an embedded learner's release gate (the ``mlflow`` extra: ``mlflow-skinny`` >= 3.5 and
pandas, which ``optimize_prompts`` reads the data with).

:class:`CombeePromptOptimizer` is a ``BasePromptOptimizer``: ``optimize_prompts`` hands it its
``eval_fn`` (candidate prompt templates and rows in, one scored record per row out), the rows and
the target templates; it runs :func:`combee_fast.optimize` over them (``async-gepa`` by default,
every template a component), and ``optimize_prompts`` registers what it returns as each prompt's
new version. ``eval_fn`` is documented as not thread-safe (it patches ``PromptVersion.template``
process-wide while it runs), and it runs the rows it is given on a thread pool of its own
(``MLFLOW_GENAI_EVAL_MAX_WORKERS``). So it is the search's *batch evaluator*
(:class:`~combee_fast.optimizing.metric.BatchMetric`): never two calls at once, each call
grading every row of one candidate that waits by then (a grading's rows arrive together), and
the rows of one call run in parallel inside it; calls for other candidates wait their turn.
A record's score is the search's score (``None``: ``optimize_prompts`` was given no scorers,
which this optimizer refuses); its inputs (a single input's value alone), outputs, expectations
and rationales are what the reflection reads.

:class:`PromptAliases` moves registry aliases as a release gate decides
(:mod:`combee_fast.embedded.release`): ``production`` always names the registry version of the
gate's incumbent, ``candidate`` the version under release (deleted when none is), each version
found by its text among the prompt's versions, or registered. Give it as an embedded learner's
``on_release``: a server that loads ``prompts:/<name>@production`` then gets what the gate allows
for every request, and nothing else (a staged candidate's share of requests is the learner's
``context_for``, which no single alias can say). The registry is written off the event loop, on
a thread of its own, the latest decision last; :meth:`PromptAliases.wait` waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from combee_fast.embedded.release import Release
from combee_fast.errors import ConfigError
from combee_fast.optimizing.api import Endpoint, optimize
from combee_fast.optimizing.row_forms import inputs_text

try:
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException
    from mlflow.genai.optimize import BasePromptOptimizer, PromptOptimizerOutput
except ImportError as exc:  # one line, naming the extra
    raise ConfigError(f"combee_fast.integrations.mlflow needs MLflow 3.5 or later: pip install -e '.[mlflow]' "
                      f"({exc})") from None

NOT_FOUND = "RESOURCE_DOES_NOT_EXIST"
"""The error code of MLflow's answer for a prompt or alias that does not exist."""

PRODUCTION, CANDIDATE = "production", "candidate"
"""The aliases :class:`PromptAliases` moves by default."""


class CombeePromptOptimizer(BasePromptOptimizer):
    """Combee's GEPA search as an MLflow prompt optimizer (module docstring). ``reflection_lm``
    and the other options are :func:`combee_fast.optimize`'s; ``val_data``: rows to select on
    (None: the training rows, as gepa does). After :meth:`optimize`, ``result`` holds the
    search's :class:`~combee_fast.optimizing.result.OptimizeResult`, ``eval_calls`` and
    ``eval_rows`` the calls of ``eval_fn`` and the rows they graded."""

    def __init__(self, reflection_lm: Endpoint, *, max_metric_calls: int | None = 100,
                 val_data: Sequence[dict[str, Any]] | None = None, **options: Any) -> None:
        self.reflection_lm = reflection_lm
        self.max_metric_calls = max_metric_calls
        self.val_data = val_data
        self.options = options
        self.result: Any = None
        self.eval_calls = self.eval_rows = 0

    def optimize(self, eval_fn: Any, train_data: list[dict[str, Any]], target_prompts: dict[str, str],
                 enable_tracking: bool = True) -> PromptOptimizerOutput:
        if eval_fn is None:
            raise ConfigError("CombeePromptOptimizer needs train_data and scorers: it searches on their scores "
                              "(optimize_prompts' zero-shot mode is not supported)")

        def grade(candidate: dict[str, str], rows: list[dict[str, Any]]) -> list[tuple[float, dict[str, Any]]]:
            records = eval_fn(candidate, rows)
            self.eval_calls, self.eval_rows = self.eval_calls + 1, self.eval_rows + len(rows)
            if any(record.score is None for record in records):
                raise ConfigError("eval_fn gave no score: give optimize_prompts scorers")
            return [(float(record.score), {"input": inputs_text(record.inputs), "output": record.outputs,
                                           "expected": record.expectations, "rationales": record.rationales})
                    for record in records]

        self.result = optimize(dict(target_prompts), train_data, self.val_data, batch_evaluator=grade,
                               reflection_lm=self.reflection_lm, max_metric_calls=self.max_metric_calls,
                               **self.options)
        best = self.result.best_candidate
        return PromptOptimizerOutput(optimized_prompts=dict(best),
                                     initial_eval_score=self.result.val_aggregate_scores[0],
                                     final_eval_score=self.result.best_score)


class PromptAliases:
    """Registry aliases of prompt ``name`` following a release gate (module docstring);
    ``client``: the MLflow client to write with (default: one on the current tracking and
    registry URIs)."""

    def __init__(self, name: str, *, client: Any = None, production: str = PRODUCTION,
                 candidate: str = CANDIDATE) -> None:
        self.name = name
        self.client = client or MlflowClient()
        self.production, self.candidate = production, candidate
        self.versions: dict[str, int] = {}  # text -> registry version
        self.error: BaseException | None = None  # the last registry write that failed
        self._latest: Release | None = None
        self._busy = False
        self._changed = threading.Condition()

    def __call__(self, release: Release) -> None:
        """Take ``release`` (an ``on_release`` callback): the registry follows it off this thread."""
        with self._changed:
            self._latest = release
            if not self._busy:
                self._busy = True
                threading.Thread(target=self._write, name=f"combee-aliases-{self.name}", daemon=True).start()

    def wait(self, timeout: float | None = None) -> None:
        """Wait until the registry says the latest release taken (raises what writing it raised)."""
        with self._changed:
            if not self._changed.wait_for(lambda: not self._busy, timeout):
                raise TimeoutError(f"prompt {self.name!r}: the registry did not follow the release within {timeout} s")
        if self.error is not None:
            raise self.error

    def _write(self) -> None:
        while True:
            with self._changed:
                release, self._latest = self._latest, None
                if release is None:
                    self._busy = False
                    self._changed.notify_all()
                    return
            try:
                self._apply(release)
                self.error = None
            except Exception as exc:  # said by wait(); the next release tries again
                self.error = exc

    def _apply(self, release: Release) -> None:
        self.client.set_prompt_alias(self.name, self.production, self._version(release.incumbent.text))
        if release.candidate is not None:
            self.client.set_prompt_alias(self.name, self.candidate, self._version(release.candidate.text))
        elif self._has_candidate():
            self.client.delete_prompt_alias(self.name, self.candidate)

    def _has_candidate(self) -> bool:
        try:
            self.client.get_prompt_version_by_alias(self.name, self.candidate)
        except MlflowException as exc:
            if exc.error_code != NOT_FOUND:
                raise
            return False
        return True

    def _version(self, text: str) -> int:
        """The registry version whose template is ``text`` (registered now when there is none)."""
        if text not in self.versions:
            try:
                found = [v for v in self.client.search_prompt_versions(self.name) if v.template == text]
            except MlflowException as exc:  # the prompt has no version yet
                if exc.error_code != NOT_FOUND:
                    raise
                found = []
            version = found[0] if found else self.client.register_prompt(self.name, text)
            self.versions[text] = int(version.version)
        return self.versions[text]
