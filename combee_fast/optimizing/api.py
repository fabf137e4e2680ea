"""``combee_fast.optimize``: a prompt search in one call, shaped like ``gepa.optimize``.

    result = combee_fast.optimize(
        seed_candidate={"system_prompt": "..."},          # named text components (or one string)
        trainset=rows, valset=rows,                        # plain Python rows
        adapter=my_adapter,                                # or evaluator=, batch_evaluator=, task_lm= + metric=
        reflection_lm="http://127.0.0.1:8000/v1",          # a callable, a base URL or an EndpointSpec
        max_metric_calls=300)                              # and/or max_dollars=...
    result.best_candidate, result.best_score, result.run_dir

The user's metric (:mod:`.metric`: a gepa ``GEPAAdapter``, an evaluator, a batch evaluator for code
that must not run twice at once, or ``task_lm`` and ``metric``) is the search's metric call; the
search is one of the engine's GEPA methods (``method``: ``async-gepa`` by default, or
``combee-gepa``, ``gepa``, ``naive-gepa``; or ``combee-ace``, a Combee-ACE playbook learned for the
seed's one component, appended to it) run by the engine's loop
(:meth:`~combee_fast.session.Session.train`): its scheduling, its metric-call budget (``async-gepa``
never overshoots it), its stop rules, checkpoints and cost accounting. The user's code runs
``max_concurrency`` calls at once at most (:mod:`.user_code`: threads, or awaited when async): every
grading of the search runs that many rows at once, and the method's proposals overlap as far as that
allows. A callable ``reflection_lm`` is served on loopback (:mod:`.lm_server`), so reflection calls
are the engine's model calls like any endpoint's.

``minibatch``: the rows a proposal reflects on (``combee-ace``: a step's batch; None: 3 for serial
``gepa``, as gepa's default; else :data:`BATCHED_MINIBATCH` or the whole trainset if smaller).
``combee-ace`` makes ``max_metric_calls`` into passes over the trainset (rounded up), scores the
seed on the valset first and validates its playbook as the run loop does (those metric calls on
top); its result's candidates are the seed and the seed with the best playbook. ``max_dollars``
stops the search once the engine's model calls cost that much (the reflection endpoint, and
``task_lm`` when it is an endpoint, need prices: an :class:`~combee_fast.config.EndpointSpec` with
``price_in`` and ``price_out``); without ``max_metric_calls`` it is the only budget. ``run_dir``: a
run folder (the files of ``combee learn``: ledger, candidates, checkpoint, report); a folder holding
a run of an earlier call is resumed from its checkpoint (its rows must be the same: checked), with
this call's arguments. ``seed`` roots every draw (parents, minibatches, shuffles).

**Reproducible.** Two calls with the same arguments give the same search (candidates, parents,
scores, metric calls; not ``wall_seconds``) whatever seconds the user's code takes on each call
and whatever order its calls end in, when that code is deterministic (the same score and
feedback for a candidate on a row, the same reply to a prompt) and every reflection call gets an
answer. Every method but ``async-gepa`` decides nothing on time; ``async-gepa`` orders its
decisions by a schedule of the seconds each call lasts (:mod:`combee_fast.gepa.pipeline`,
**Time.**), and there a metric call of the user's code lasts
:data:`~combee_fast.optimizing.calls.METRIC_CALL_SECONDS` and a callable ``reflection_lm``'s call
as its tokens say (:func:`~combee_fast.optimizing.lm_server.schedule_seconds`), never their wall
seconds (the real calls still run as soon as they may). A reflection call whose every attempt
failed is timed by the clock, and a model given as an endpoint (a URL or an
:class:`EndpointSpec`) as ``combee learn`` times it: by the seconds it reports (``combee
sim-server``: reproducible), else by the seconds its calls took, which differ from run to run on
a real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from combee_fast.ace.roles import GENERATOR
from combee_fast.config import EndpointSpec, EvalConfig, MapConfig, SessionConfig, TaskConfig, TrainConfig
from combee_fast.engine.loop import run
from combee_fast.errors import CombeeError, ConfigError
from combee_fast.gepa.candidate import SYSTEM_PROMPT, Candidate
from combee_fast.gepa.pool import GepaState
from combee_fast.gepa.settings import SECTION as GEPA, GepaConfig
from combee_fast.optimizing.kind import ACE_PATH, PATH
from combee_fast.optimizing.lm_server import MODEL, CallableEndpoint
from combee_fast.optimizing.metric import (AdapterMetric, BatchMetric, EndpointTaskMetric, EvaluatorMetric, MetricCall,
                                           TaskLmMetric)
from combee_fast.optimizing.result import OptimizeResult, optimize_result, playbook_result
from combee_fast.optimizing.rows import TRAIN, VAL, RowsTask
from combee_fast.optimizing.user_code import UserCode
from combee_fast.readout.summary import failed_summary, run_summary, shown_at
from combee_fast.record.rundir import RunDir
from combee_fast.roles.calls import RoleCalls
from combee_fast.run.stops import DollarBudget
from combee_fast.run.train import TrainResult
from combee_fast.session import Session, open_session
from combee_fast.tasks.base import verify_split

ACE_METHOD = "combee-ace"
"""The method learning a Combee-ACE playbook for the seed's one component."""

METHODS = ("async-gepa", "combee-gepa", "gepa", "naive-gepa", ACE_METHOD)
"""The methods ``optimize`` runs."""

MAX_CONCURRENCY = 8
"""The user's calls at once by default."""

BATCHED_MINIBATCH = 12
"""The default minibatch of the batched methods (at most the trainset): enough rows for a few
reflection groups to run side by side."""

SERIAL_MINIBATCH = 3
"""Serial ``gepa``'s default minibatch, gepa's ``reflection_minibatch_size``."""

UNBOUNDED = 2**62
"""The metric-call budget of a search bounded by dollars alone."""

Endpoint = str | EndpointSpec | Callable[..., Any]
"""A model: a callable, a base URL ending in ``/v1``, or an :class:`EndpointSpec`."""


async def optimize_async(
    seed_candidate: Mapping[str, str] | str,
    trainset: Sequence[Any],
    valset: Sequence[Any] | None = None,
    *,
    adapter: Any = None,
    evaluator: Callable[..., Any] | None = None,
    batch_evaluator: Callable[..., Any] | None = None,
    task_lm: Endpoint | None = None,
    metric: Callable[[Any, str], Any] | None = None,
    reflection_lm: Endpoint,
    max_metric_calls: int | None = None,
    max_dollars: float | None = None,
    method: str = "async-gepa",
    max_concurrency: int = MAX_CONCURRENCY,
    minibatch: int | None = None,
    run_dir: str | Path | None = None,
    seed: int = 0,
) -> OptimizeResult:
    """The search (module docstring), on the running loop; :func:`optimize` runs it on its own."""
    components, plain = _seed(seed_candidate)
    _check(adapter=adapter, evaluator=evaluator, batch_evaluator=batch_evaluator, task_lm=task_lm, metric=metric,
           method=method, max_metric_calls=max_metric_calls, max_dollars=max_dollars, max_concurrency=max_concurrency)
    with UserCode(max_concurrency) as code:
        async with contextlib.AsyncExitStack() as stack:
            reflection = await _endpoint(reflection_lm, code, stack, what="reflection_lm")
            solver = await _endpoint(task_lm, code, stack, what="task_lm") if isinstance(task_lm, (str, EndpointSpec)) \
                else EndpointSpec(url=reflection.url, model=reflection.model,
                                  response_format=reflection.response_format,
                                  price_in=0.0, price_out=0.0)  # user code: no tokens of ours
            if max_dollars is not None:
                _check_priced(reflection, solver)
            start = Candidate(components)
            task = RowsTask(trainset, trainset if valset is None else valset,
                            _metric(adapter, evaluator, batch_evaluator, task_lm, metric, code, plain=plain), start)
            size = minibatch or (SERIAL_MINIBATCH if method == "gepa" else min(BATCHED_MINIBATCH, len(trainset)))
            budget = UNBOUNDED if max_metric_calls is None else max_metric_calls
            ace = method == ACE_METHOD
            config = SessionConfig(
                learner=ACE_PATH if ace else PATH, method="combee" if ace else method, seed=seed,
                task=TaskConfig(name=task.name, train_split=TRAIN, val_split=VAL),
                map=MapConfig(workers=max_concurrency, max_rounds=0), eval=EvalConfig(parallel=max_concurrency),
                learners={GEPA: GepaConfig(minibatch=size, combee_minibatch=size, max_metric_calls=budget)},
                train=TrainConfig(batch_size=size, epochs=max(1, -(-budget // len(trainset))) if ace else 1),
                endpoints={"default": reflection, "serve": solver})
            stops = [DollarBudget(max_dollars)] if max_dollars is not None else []
            async with open_session(config, task=task) as session:
                if not ace:
                    result = await _train(session, GepaState(seed=start), run_dir, stops)
                    return optimize_result(result, plain=plain, run_dir=run_dir)
                empty = session.choice.kind.initial(config)
                seed_score = (await session.evaluate(empty, session.val_split.examples)).accuracy
                result = await _train(session, empty, run_dir, stops)
                return playbook_result(result, start, seed_score, session.calls.calls.get(GENERATOR.key, 0),
                                       plain=plain, run_dir=run_dir)


@functools.wraps(optimize_async, assigned=(), updated=())  # only __wrapped__: its signature is shown
def optimize(*args: Any, **kwargs: Any) -> OptimizeResult:
    """The search (module docstring) on a loop of its own; inside a running loop (a notebook, an
    async server) await :func:`optimize_async` instead. A ``seed`` gives the same search on every
    call, whatever seconds the user's code takes, when that code and the reflection model are
    deterministic (module docstring, **Reproducible.**)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run(optimize_async(*args, **kwargs))
    raise ConfigError("combee_fast.optimize() was called inside a running event loop: there, "
                      "await combee_fast.optimize_async(...) with the same arguments")


def _seed(seed_candidate: Mapping[str, str] | str) -> tuple[dict[str, str], bool]:
    """The seed's components, and whether it was a plain string (one component, ``system_prompt``)."""
    if isinstance(seed_candidate, str):
        return {SYSTEM_PROMPT: seed_candidate}, True
    components = dict(seed_candidate) if isinstance(seed_candidate, Mapping) else {}
    if not components or not all(isinstance(k, str) and isinstance(v, str) for k, v in components.items()):
        raise ConfigError("optimize: seed_candidate must be a string or a non-empty mapping of component names to "
                          "texts")
    return components, False


def _check(*, adapter: Any, evaluator: Any, batch_evaluator: Any, task_lm: Any, metric: Any, method: str,
           max_metric_calls: int | None, max_dollars: float | None, max_concurrency: int) -> None:
    """:class:`ConfigError` (one line) for arguments that do not make one search."""
    given = [name for name, value in (("adapter", adapter), ("evaluator", evaluator),
                                      ("batch_evaluator", batch_evaluator), ("task_lm", task_lm)) if value is not None]
    if len(given) != 1:
        raise ConfigError(f"optimize: give one of adapter=, evaluator=, batch_evaluator= or task_lm= (with metric=), "
                          f"not {' and '.join(given) or 'none'}")
    if (task_lm is None) != (metric is None):
        raise ConfigError("optimize: task_lm= and metric= go together (metric(row, reply) grades task_lm's reply)")
    if method not in METHODS:
        raise ConfigError(f"optimize: unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if max_metric_calls is None and max_dollars is None:
        raise ConfigError("optimize: give a budget: max_metric_calls= and/or max_dollars=")
    if method == ACE_METHOD and max_metric_calls is None:
        raise ConfigError("optimize(method='combee-ace') needs max_metric_calls= (its passes over the trainset)")
    if max_dollars is not None and not max_dollars > 0:
        raise ConfigError(f"optimize: max_dollars must be > 0, got {max_dollars!r}")
    if max_concurrency < 1:
        raise ConfigError(f"optimize: max_concurrency must be >= 1, got {max_concurrency!r}")


def _check_priced(*specs: EndpointSpec) -> None:
    if any(spec.price_in is None for spec in specs):
        raise ConfigError("optimize: max_dollars needs the price of every model the search calls: give "
                          "reflection_lm (and a task_lm endpoint) as EndpointSpec(url=..., model=..., price_in=..., "
                          "price_out=...), in dollars per million tokens")


async def _endpoint(lm: Endpoint | None, code: UserCode, stack: contextlib.AsyncExitStack, *,
                    what: str) -> EndpointSpec:
    """The endpoint of ``lm``: as given, a base URL's, or a callable's served on loopback."""
    if isinstance(lm, EndpointSpec) and lm.url is not None:
        return lm
    if isinstance(lm, str) and lm.startswith(("http://", "https://")):
        return EndpointSpec(url=lm)
    if callable(lm):
        served = await stack.enter_async_context(CallableEndpoint(lm, code))
        return EndpointSpec(url=served.url, model=MODEL, response_format="none")
    raise ConfigError(f"optimize: {what} must be a callable, an http(s) base URL or an EndpointSpec with a url, "
                      f"got {lm!r}")


def _metric(adapter: Any, evaluator: Callable[..., Any] | None, batch_evaluator: Callable[..., Any] | None,
            task_lm: Endpoint | None, metric: Callable[[Any, str], Any] | None, code: UserCode, *,
            plain: bool) -> Callable[[RoleCalls], MetricCall]:
    """What grades a candidate on a row, given a run's role calls (:mod:`.metric`)."""
    if adapter is not None:
        graded: MetricCall = AdapterMetric(adapter, code)
    elif evaluator is not None:
        graded = EvaluatorMetric(evaluator, code, plain=plain)
    elif batch_evaluator is not None:
        graded = BatchMetric(batch_evaluator, code, plain=plain)
    else:
        assert task_lm is not None and metric is not None
        if isinstance(task_lm, (str, EndpointSpec)):
            return lambda calls: EndpointTaskMetric(calls, metric, code)
        graded = TaskLmMetric(task_lm, metric, code)
    return lambda calls: graded


async def _train(session: Session, seed: Any, run_dir: str | Path | None,
                 stops: Sequence[DollarBudget]) -> TrainResult:
    """The search on ``session``: into ``run_dir`` (resumed when it holds a run), or no files."""
    if run_dir is None:
        return await session.train(artifact=seed, stops=stops)
    if not (Path(run_dir) / "config.json").is_file():
        return await session.train(out=run_dir, artifact=seed, stops=stops)
    folder = RunDir.reopen(run_dir)
    try:
        for split, manifest in zip((session.train_split, session.val_split), folder.read_splits()):
            verify_split(split, manifest)
        resumed_from = folder.resumed.steps if folder.resumed is not None else None
        result = await session.train(run_dir=folder, stops=stops)
        folder.write_summary(run_summary(result, shown_at(run_dir, folder), resumed_from=resumed_from))
        return result
    except CombeeError as exc:
        folder.write_summary(failed_summary(exc, shown_at(run_dir, folder)))
        raise
    finally:
        folder.close()
