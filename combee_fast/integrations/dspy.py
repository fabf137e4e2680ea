"""DSPy: :class:`CombeeOptimizer`, a DSPy ``Teleprompter`` whose search is Combee's (the ``dspy``
extra).

``CombeeOptimizer(metric, reflection_lm=...).compile(student, trainset=..., valset=...)`` returns
a copy of ``student`` whose predictors' instructions were learned by
:func:`combee_fast.optimize` (``async-gepa`` by default): every predictor's instructions are one
component of the candidate, and a metric call runs a copy of the program with the candidate's
instructions on one example, DSPy's own LM client doing its calls (the LM configured with
``dspy.configure``, or ``lm``), and grades it with the DSPy ``metric(example, prediction)``: a
number or a bool, or ``dspy.Prediction(score=..., feedback=...)`` (the shape of ``dspy.GEPA``'s
feedback metrics), whose feedback the reflection reads beside the example's inputs and the
program's outputs. Examples run ``max_concurrency`` at once on threads, each program a copy of
its own, under ``dspy.context(lm=...)``, DSPy's per-thread settings. ``reflection_lm``: a
``dspy.LM`` (served on loopback as an endpoint, so its calls are the engine's), or a base URL or
an :class:`~combee_fast.config.EndpointSpec`. ``valset`` None: the trainset, as DSPy's GEPA does.
After :meth:`CombeeOptimizer.compile`, ``result`` holds the search's
:class:`~combee_fast.optimizing.result.OptimizeResult`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from combee_fast.errors import ConfigError
from combee_fast.optimizing.api import Endpoint, optimize
from combee_fast.optimizing.row_forms import inputs_text

try:
    import dspy
    from dspy.teleprompt import Teleprompter
except ImportError as exc:  # one line, naming the extra
    raise ConfigError(f"combee_fast.integrations.dspy needs DSPy: pip install -e '.[dspy]' ({exc})") from None


class CombeeOptimizer(Teleprompter):
    """A DSPy teleprompter running Combee's parallel GEPA (module docstring); ``options`` are
    :func:`combee_fast.optimize`'s (``max_metric_calls``, ``max_dollars``, ``method``,
    ``max_concurrency``, ``minibatch``, ``run_dir``, ``seed``)."""

    def __init__(self, metric: Callable[..., Any], *, reflection_lm: Any, lm: Any = None,
                 max_metric_calls: int | None = 200, **options: Any) -> None:
        super().__init__()
        self.metric = metric
        self.reflection_lm = reflection_lm
        self.lm = lm
        self.max_metric_calls = max_metric_calls
        self.options = options
        self.result: Any = None

    def compile(self, student: Any, *, trainset: Sequence[Any], teacher: Any = None,
                valset: Sequence[Any] | None = None, **kwargs: Any) -> Any:
        """``student`` with its predictors' instructions learned (module docstring)."""
        lm = self.lm or dspy.settings.lm
        if lm is None:
            raise ConfigError("CombeeOptimizer: no LM to run the program with: dspy.configure(lm=...) or give lm=")
        seed = {name: predictor.signature.instructions for name, predictor in student.named_predictors()}
        if not seed:
            raise ConfigError("CombeeOptimizer: the program has no predictor to learn instructions for")

        def evaluate(candidate: dict[str, str], example: Any) -> tuple[float, dict[str, Any]]:
            program = _with_instructions(student, candidate)
            with dspy.context(lm=lm):
                prediction = program(**example.inputs())
            return _graded(self.metric(example, prediction), example, prediction)

        self.result = optimize(seed, list(trainset), None if valset is None else list(valset), evaluator=evaluate,
                               reflection_lm=_endpoint(self.reflection_lm), max_metric_calls=self.max_metric_calls,
                               **self.options)
        compiled = _with_instructions(student, self.result.best_candidate)
        compiled._compiled = True
        return compiled


def _with_instructions(program: Any, instructions: dict[str, str]) -> Any:
    """A copy of ``program`` whose predictors follow ``instructions`` (by predictor name)."""
    copy = program.deepcopy()
    for name, predictor in copy.named_predictors():
        predictor.signature = predictor.signature.with_instructions(instructions[name])
    return copy


def _graded(value: Any, example: Any, prediction: Any) -> tuple[float, dict[str, Any]]:
    """A DSPy metric's ``value`` as a score and the record the reflection reads."""
    score = getattr(value, "score", value)
    found: dict[str, Any] = {"input": inputs_text(dict(example.inputs())), "output": dict(prediction.items())}
    feedback = getattr(value, "feedback", None)
    if feedback is not None:
        found["feedback"] = str(feedback)
    return float(score), found


def _endpoint(lm: Any) -> Endpoint:
    """A ``dspy.LM`` as the callable :func:`combee_fast.optimize` serves; anything else as given."""
    if isinstance(lm, dspy.BaseLM):
        return lambda prompt: lm(prompt)
    return lm
