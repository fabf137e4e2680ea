"""Peers side by side on ONE simulated endpoint.

    pip install -e '.[bench]'        # the PyPI peers
    python bench/peers.py            # Formula, flat preset (0.4 s + 0.025 s per completion token)

One :class:`~combee_fast.sim.server.SimServer` (real HTTP on loopback) serves, in one sitting:
the PyPI ``gepa`` package (its defaults: ``optimize`` with the default adapter and reflection,
``reflection_minibatch_size`` 3, Pareto selection; through blocking LM callables that call the
endpoint), our ``gepa`` (also once with one request in flight, to compare the loops alone), our
``combee-gepa``, our ``async-gepa`` (the same minibatch, its stages decoupled, several proposals
in flight, its budget reserved at dispatch), our ``sequential`` ACE and our ``combee``; and the PyPI ``ace-framework``
package's ACE (0.7.1: the current release needs Python >= 3.12), reported as run or as
"cannot run: <reason>"; then the PyPI ``textgrad`` package (0.1.8, its own loop: forward, an LLM
loss, backward through both, one ``TextualGradientDescent`` step per example, through an
``EngineLM`` of ours), our serial ``textgrad`` (one request in flight) and ``combee-textgrad``,
and DSPy's ``MIPROv2`` (3.4, ``auto="light"``, through ``dspy.LM`` on the endpoint).

Our roles are answered by the task world; the peers' prompts, which the world cannot play, by
:class:`~combee_fast.sim.peers.PeerReplies` (text of the length our roles' replies have, in the
format the peer parses), so the peers' time, call counts and critical-path depth are comparable
with ours while their accuracy is not. Critical-path depth and peak concurrency come from the
server's request spans (:mod:`combee_fast.sim.spans`); seconds are simulated seconds on each
run's critical path (the PyPI ``gepa`` run keeps one request in flight, so its critical path is
the sum of its latencies). GEPA runs use the same train and validation slices and the same
metric-call budget; the ACE runs learn from the same train slice without validation.

Last line: ``gepa_pypi_s_per_call=<a> gepa_ours_s_per_call=<b> combee_gepa_s_per_call=<c>
combee_ace_s_per_sample=<d> sequential_ace_s_per_sample=<e> textgrad_pypi_s_per_sample=<f>
textgrad_ours_s_per_sample=<g> combee_textgrad_s_per_sample=<h> mipro_s_per_metric_call=<i>
async_gepa_s_per_call=<j> async_gepa_overshoot=<k>`` (per metric call for GEPA and MIPROv2, per
training sample for ACE and TextGrad; ``k``: the metric calls ``async-gepa`` made past the budget).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import importlib.util
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# This folder holds scripts named like the peers (bench/textgrad.py): the peers are the installed packages.
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != os.path.dirname(os.path.abspath(__file__))]

from combee_fast.config import EndpointSpec, GepaConfig, MapConfig, SessionConfig, TaskConfig, TransportConfig
from combee_fast.endpoint.blocking import BlockingChat
from combee_fast.engine.loop import run
from combee_fast.gepa.candidate import SYSTEM_PROMPT, Candidate
from combee_fast.gepa.interop import CombeeReflectionStrategy
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.schema import Example
from combee_fast.session import open_session
from combee_fast.sim.peers import PeerReplies, PeerRouter
from combee_fast.sim.server import SimServer
from combee_fast.sim.spans import chain_depth, chain_seconds, peak_overlap
from combee_fast.sim.textgrad import TextGradWorld
from combee_fast.tasks.registry import get_task

PRESET = "flat"
ACE_FRAMEWORK_NOTE = (
    "ace-framework: its releases from 0.7.2 on (current: 0.13.0) require Python >= 3.12, and this machine has "
    "3.11 only (Debian bookworm's apt sources have no python3.12 candidate); the bench runs 0.7.1, the last "
    "release that installs on 3.11, through an LLMClient of ours (its documented extension point) that calls "
    "the endpoint and asks for its roles' JSON schemas as response_format"
)


@dataclass(frozen=True)
class PeerRow:
    """One peer's run on the shared endpoint. ``metric_calls``: gradings (GEPA) or graded rollouts
    (ACE); ``samples``: training examples learned from; ``iterations``: GEPA iterations or ACE
    steps; ``reason``: why the peer did not run (None: it ran)."""

    name: str
    sim_seconds: float = 0.0
    samples: int = 0
    metric_calls: int = 0
    calls: int = 0
    iterations: int = 0
    depth: int = 0
    peak: int = 0
    accuracy: float | None = None
    accepted: int | None = None
    comparable: bool = True
    reason: str | None = None

    def per(self, value: float, count: int) -> float:
        return value / count if count else float("nan")


@dataclass(frozen=True)
class PeersArgs:
    """The bench's scale: slices of the splits, the GEPA budget, ACE's batch, the time scale."""

    task: str = "formula"
    train: int = 60
    val: int = 30
    budget: int = 300
    combee_batch: int = 20
    ace_batch: int = 20
    time_scale: float = 0.01
    seed: int = 0


def _gepa_data(examples: Sequence[Example]) -> list[dict[str, Any]]:
    """Examples in the PyPI ``gepa`` default adapter's data format."""
    return [{"input": e.input, "answer": e.target or "", "additional_context": {}} for e in examples]


class _Counts:
    """GEPA callback counting iterations, minibatch samples and accepted children."""

    def __init__(self) -> None:
        self.iterations = self.samples = self.accepted = 0

    def on_iteration_start(self, event: Any) -> None:
        self.iterations += 1

    def on_minibatch_sampled(self, event: Any) -> None:
        self.samples += len(event["minibatch_ids"])

    def on_candidate_accepted(self, event: Any) -> None:
        self.accepted += 1


class _Quiet:
    def log(self, message: str) -> None:
        pass


def gepa_pypi_available() -> bool:
    return importlib.util.find_spec("gepa") is not None and importlib.util.find_spec("gepa.api") is not None


def run_gepa_pypi(
    url: str, args: PeersArgs, train_set: Sequence[Example], val_set: Sequence[Example], *, combee: bool = False,
) -> dict[str, Any]:
    """The PyPI package's ``optimize`` with its defaults (blocking; run it in a thread). With
    ``combee``, its reflection is our :class:`~combee_fast.gepa.interop.CombeeReflectionStrategy`
    on a minibatch of ``args.combee_batch`` (the rest of GEPA's loop unchanged)."""
    import gepa

    lm = BlockingChat(url, "sim")
    counts = _Counts()
    reflection: dict[str, Any] = {"reflection_lm": lm}
    if combee:
        reflection = {"reflection_strategy": CombeeReflectionStrategy(lm, seed=args.seed),
                      "reflection_minibatch_size": args.combee_batch}
    try:
        result = gepa.optimize(
            seed_candidate={SYSTEM_PROMPT: Candidate.seed().render()},
            trainset=_gepa_data(train_set), valset=_gepa_data(val_set),
            task_lm=lm, max_metric_calls=args.budget, seed=args.seed,
            logger=_Quiet(), callbacks=[counts], **reflection,
        )
    finally:
        lm.close()
    return {
        "sim_seconds": lm.sim_seconds, "calls": lm.calls, "peak_client": lm.peak_in_flight,
        "metric_calls": result.total_metric_calls or 0, "iterations": counts.iterations, "samples": counts.samples,
        "accepted": counts.accepted,
    }


def ace_framework_version() -> str | None:
    """The installed ace-framework's version (None: not installed)."""
    try:
        return importlib.metadata.version("ace-framework")
    except importlib.metadata.PackageNotFoundError:
        return None


def run_ace_framework(url: str, train_set: Sequence[Example]) -> dict[str, Any]:
    """ace-framework's offline ACE (its defaults: one epoch, one agent, reflector and skill-manager
    call per sample) over ``train_set`` (blocking; run it in a thread). Its roles call
    ``complete_structured`` when the client has it, so ours does: the role's pydantic schema goes
    out as ``response_format`` and the reply is validated by the role's model."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its cost map
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "false")  # browser-use's telemetry
    from ace import Agent, LLMClient, OfflineACE, Reflector, Sample, SimpleEnvironment, SkillManager
    from ace.llm import LLMResponse

    chat = BlockingChat(url, "sim")

    class EndpointLLM(LLMClient):
        def complete(self, prompt: str, **kwargs: Any) -> LLMResponse:
            return LLMResponse(text=chat(prompt))

        def complete_structured(self, prompt: str, response_model: Any, **kwargs: Any) -> Any:
            return response_model.model_validate_json(chat(prompt, response_model.model_json_schema()))

    llm = EndpointLLM("sim")
    samples = [Sample(question=e.input, ground_truth=e.target) for e in train_set]
    try:
        learner = OfflineACE(agent=Agent(llm), reflector=Reflector(llm), skill_manager=SkillManager(llm),
                             enable_observability=False)
        results = learner.run(samples, SimpleEnvironment(), epochs=1)
    finally:
        chat.close()
    return {"sim_seconds": chat.sim_seconds, "calls": chat.calls, "samples": len(results),
            "peak_client": chat.peak_in_flight}


TEXTGRAD_EVALUATION = (
    "Judge the model answer to the question against the grader remarks: say whether it is correct and, if not, "
    "what exactly went wrong. Be concise and concrete."
)


def textgrad_pypi_available() -> bool:
    return importlib.util.find_spec("textgrad") is not None


def run_textgrad_pypi(url: str, task: Any, train_set: Sequence[Example], *, batch: int = 1) -> dict[str, Any]:
    """The PyPI ``textgrad`` package's own loop (blocking; run it in a thread): a system-prompt
    :class:`textgrad.Variable` under a ``BlackboxLLM``, an LLM loss (``MultiFieldEvaluation`` of
    the question, the answer and the grader's remarks), ``backward`` through both calls and a
    ``TextualGradientDescent`` step per ``batch`` examples (1: one step per example, as our
    ``textgrad``), every call through an engine of ours (its documented extension point,
    ``EngineLM``) that calls the endpoint."""
    os.environ.setdefault("TEXTGRAD_LOG_DIR", tempfile.mkdtemp(prefix="textgrad-logs-"))  # it logs to ./logs/
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm (its dependency) would fetch its cost map
    import textgrad as tg
    from textgrad.engine import EngineLM

    logging.getLogger("textgrad").propagate = False  # its log file only, not the console ace-framework set up

    from combee_fast.textgrad.variable import PromptVariable

    chat = BlockingChat(url, "sim")

    class EndpointEngine(EngineLM):
        model_string = "sim"

        def generate(self, prompt: str, system_prompt: str | None = None, **kwargs: Any) -> str:
            system = [{"role": "system", "content": system_prompt}] if system_prompt else []
            return chat([*system, {"role": "user", "content": prompt}])

        def __call__(self, prompt: str, **kwargs: Any) -> str:
            return self.generate(prompt, **kwargs)

    engine = EndpointEngine()
    tg.set_backward_engine(engine, override=True)
    prompt = tg.Variable(PromptVariable.seed().render(), requires_grad=True,
                         role_description="system prompt of the model that answers the questions")
    model = tg.BlackboxLLM(engine, system_prompt=prompt)
    optimizer = tg.TGD(parameters=[prompt], engine=engine)
    loss = tg.loss.MultiFieldEvaluation(
        tg.Variable(TEXTGRAD_EVALUATION, requires_grad=False, role_description="evaluation instruction"),
        role_descriptions=["question", "model answer", "grader remarks"], engine=engine)
    steps = 0
    try:
        for start in range(0, len(train_set), batch):
            optimizer.zero_grad()
            losses = []
            for example in train_set[start: start + batch]:
                question = tg.Variable(example.input, requires_grad=False, role_description="question to the model")
                answer = model(question)
                final = answer.value.rsplit("Final answer:", 1)[-1].strip()
                remarks = tg.Variable(task.score(example, final).feedback or "(none)", requires_grad=False,
                                      role_description="grader remarks")
                losses.append(loss([question, answer, remarks]))
            tg.sum(losses).backward()
            optimizer.step()
            steps += 1
    finally:
        chat.close()
    return {"sim_seconds": chat.sim_seconds, "calls": chat.calls, "samples": len(train_set), "steps": steps,
            "prompt_lines": len(prompt.value.splitlines())}


def dspy_version() -> str | None:
    """The installed dspy's version (None: not installed)."""
    try:
        return importlib.metadata.version("dspy")
    except importlib.metadata.PackageNotFoundError:
        return None


def run_mipro(url: str, task: Any, train_set: Sequence[Example], val_set: Sequence[Example], *,
              seed: int) -> dict[str, Any]:
    """DSPy's MIPROv2 with its defaults (``auto="light"``: bootstrapped demos, grounded instruction
    proposals, an Optuna search of minibatch trials) compiling ``ChainOfThought("question ->
    answer")`` on ``train_set``, validated on ``val_set`` (blocking; run it in a thread). Its LM
    is ``dspy.LM`` on the endpoint (litellm's OpenAI-compatible client, no cache). Its calls are
    counted from the server's spans; ``metric_calls`` are the metric's invocations."""
    os.environ.setdefault("DSPY_CACHEDIR", tempfile.mkdtemp(prefix="dspy-cache-"))
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("TQDM_DISABLE", "1")  # its evaluations' progress bars
    import dspy

    dspy.disable_logging()

    by_question = {e.input: e for e in [*train_set, *val_set]}
    graded = 0

    def metric(example: Any, prediction: Any, trace: Any = None) -> float:
        nonlocal graded
        graded += 1
        return task.score(by_question[example.question], str(getattr(prediction, "answer", "") or "")).value

    def data(examples: Sequence[Example]) -> list[Any]:
        return [dspy.Example(question=e.input, answer=e.target or "").with_inputs("question") for e in examples]

    lm = dspy.LM("openai/sim", api_base=url, api_key="none", cache=False, temperature=0.0, max_tokens=1024,
                 num_retries=0)
    optimizer = dspy.MIPROv2(metric=metric, prompt_model=lm, task_model=lm, auto="light", seed=seed, verbose=False)
    with dspy.context(lm=lm):
        best = optimizer.compile(dspy.ChainOfThought("question -> answer"), trainset=data(train_set),
                                 valset=data(val_set), minibatch_size=min(35, len(val_set)))
    return {"metric_calls": graded, "samples": len(train_set), "trials": len(getattr(best, "trial_logs", {}))}


async def _measured(server: SimServer, work: Callable[[], Any]) -> tuple[Any, int, int]:
    mark = server.span_count()
    outcome = await work()
    spans = server.spans(mark)
    return outcome, chain_depth(spans), peak_overlap(spans)


def _session_config(
    url: str, args: PeersArgs, method: str, *, val: int, concurrency: int | None = None,
) -> SessionConfig:
    """Our run on the shared endpoint: the first ``args.train`` train rows, the first ``val`` val rows."""
    transport, workers = TransportConfig(), MapConfig()
    if concurrency is not None:
        transport, workers = TransportConfig(concurrency=concurrency), MapConfig(workers=concurrency)
    return SessionConfig(
        method=method, seed=args.seed,
        task=TaskConfig(name=args.task, train_split=f"train[0:{args.train}]", val_split=f"val[0:{val}]"),
        gepa=GepaConfig(max_metric_calls=args.budget, combee_minibatch=args.combee_batch), transport=transport,
        map=workers, endpoints={"default": EndpointSpec(url, "sim")},
    )


async def run_ours_gepa(
    server: SimServer, args: PeersArgs, method: str, name: str, *, concurrency: int | None = None,
) -> PeerRow:
    config = _session_config(server.url, args, method, val=args.val, concurrency=concurrency)
    async with open_session(config) as session:
        result, depth, peak = await _measured(server, lambda: session.train())
    return PeerRow(
        name, result.train_sim_seconds, result.samples, result.summary["metric_calls"], result.calls,
        result.steps - 1, depth, peak, result.best_val_accuracy, result.summary["accepted"],
    )


async def run_ours_ace(server: SimServer, args: PeersArgs, method: str, batch: int) -> PeerRow:
    config = _session_config(server.url, args, method, val=0)  # no validation: every call is learning
    async with open_session(config) as session:
        result, depth, peak = await _measured(server, lambda: session.train(plan=FixedBatch(batch)))
    return PeerRow(
        f"{method} ACE", result.train_sim_seconds, result.samples, result.rollouts, result.calls, result.steps,
        depth, peak,
    )


async def run_ours_textgrad(server: SimServer, args: PeersArgs, method: str, batch: int, name: str, *,
                            concurrency: int | None = None) -> PeerRow:
    config = _session_config(server.url, args, method, val=0, concurrency=concurrency)  # every call is learning
    async with open_session(config) as session:
        result, depth, peak = await _measured(server, lambda: session.train(plan=FixedBatch(batch)))
    return PeerRow(name, result.train_sim_seconds, result.samples, result.rollouts, result.calls, result.steps, depth,
                   peak)


async def run_prompt_peers(server: SimServer, args: PeersArgs, task: Any, train_set: Sequence[Example],
                           val_set: Sequence[Example]) -> list[PeerRow]:
    """The PyPI textgrad and DSPy's MIPROv2 beside our serial and Combee TextGrad; a peer that
    cannot run gets a row saying why. MIPROv2's seconds are the critical path of its spans
    (:func:`~combee_fast.sim.spans.chain_seconds`): litellm does not report the server's latency."""
    rows: list[PeerRow] = []
    if not textgrad_pypi_available():
        rows.append(PeerRow("textgrad (PyPI)", reason="cannot run: the textgrad package is not installed "
                            "(pip install -e '.[bench]')"))
    else:
        got, depth, peak = await _measured(server, lambda: asyncio.to_thread(run_textgrad_pypi, server.url, task,
                                                                             train_set))
        rows.append(PeerRow(f"textgrad (PyPI {importlib.metadata.version('textgrad')})", got["sim_seconds"],
                            got["samples"], got["samples"], got["calls"], got["steps"], depth, peak, comparable=False))
    rows.append(await run_ours_textgrad(server, args, "textgrad", 1, "textgrad (ours, 1 in flight)", concurrency=1))
    rows.append(await run_ours_textgrad(server, args, "combee-textgrad", args.ace_batch, "combee-textgrad"))
    if dspy_version() is None:
        rows.append(PeerRow("MIPROv2 (DSPy)", reason="cannot run: dspy is not installed (pip install -e '.[bench]')"))
        return rows
    mark = server.span_count()
    got = await asyncio.to_thread(run_mipro, server.url, task, train_set, val_set, seed=args.seed)
    spans = server.spans(mark)
    rows.append(PeerRow(f"MIPROv2 (DSPy {dspy_version()})", chain_seconds(spans), got["samples"], got["metric_calls"],
                        len(spans), got["trials"], chain_depth(spans), peak_overlap(spans), comparable=False))
    return rows


async def run_peers(args: PeersArgs) -> list[PeerRow]:
    """Every peer on one endpoint, in order; a peer that cannot run gets a row with its reason."""
    task = get_task(args.task)
    train_set = task.load("train").examples[: args.train]
    val_set = task.load("val").examples[: args.val]
    world = TextGradWorld.for_task(task)  # the ACE, GEPA and TextGrad roles
    rows: list[PeerRow] = []
    async with SimServer(PeerRouter(world, PeerReplies(world)), preset=PRESET, time_scale=args.time_scale,
                         seed=args.seed) as server:
        for name, combee in (("gepa (PyPI)", False), ("gepa (PyPI) + Combee refl.", True)):
            if not gepa_pypi_available():
                rows.append(PeerRow(name, reason="cannot run: the gepa package is not installed "
                                    "(pip install -e '.[bench]')"))
                continue
            got, depth, peak = await _measured(server, lambda: asyncio.to_thread(
                run_gepa_pypi, server.url, args, train_set, val_set, combee=combee))
            rows.append(PeerRow(name, got["sim_seconds"], got["samples"], got["metric_calls"], got["calls"],
                                got["iterations"], depth, peak, accepted=got["accepted"], comparable=False))
        rows.append(await run_ours_gepa(server, args, "gepa", "gepa (ours)"))
        rows.append(await run_ours_gepa(server, args, "gepa", "gepa (ours, 1 in flight)",
                                        concurrency=1))
        rows.append(await run_ours_gepa(server, args, "combee-gepa", "combee-gepa"))
        rows.append(await run_ours_gepa(server, args, "async-gepa", "async-gepa"))
        rows.append(await run_ours_ace(server, args, "sequential", 1))
        rows.append(await run_ours_ace(server, args, "combee", args.ace_batch))
        if ace_framework_version() is None:
            rows.append(PeerRow("ACE (ace-framework)", reason="cannot run: ace-framework is not installed "
                                "(pip install -e '.[bench]'); " + ACE_FRAMEWORK_NOTE))
        else:
            got, depth, peak = await _measured(server, lambda: asyncio.to_thread(
                run_ace_framework, server.url, train_set))
            rows.append(PeerRow(f"ACE (ace-framework {ace_framework_version()})", got["sim_seconds"], got["samples"],
                                got["samples"], got["calls"], got["samples"], depth, peak, comparable=False))
        rows += await run_prompt_peers(server, args, task, train_set, val_set)
    return rows


def table(rows: Sequence[PeerRow]) -> list[str]:
    """The printed table, one line per peer."""
    lines = [f"{'peer':<28}{'sim s':>8}{'s/sample':>10}{'s/metric':>10}{'calls/smp':>10}{'calls/it':>9}"
             f"{'iters':>6}{'acc.d':>6}{'depth':>6}{'peak':>5}{'val acc':>8}"]
    for r in rows:
        if r.reason is not None:
            lines.append(f"{r.name:<28}{r.reason}")
            continue
        accuracy = "n/c" if not r.comparable else f"{r.accuracy:.3f}" if r.accuracy is not None else "-"
        accepted = "-" if r.accepted is None else str(r.accepted)
        lines.append(
            f"{r.name:<28}{r.sim_seconds:>8.0f}{r.per(r.sim_seconds, r.samples):>10.2f}"
            f"{r.per(r.sim_seconds, r.metric_calls):>10.3f}{r.per(r.calls, r.samples):>10.2f}"
            f"{r.per(r.calls, r.iterations):>9.2f}{r.iterations:>6}{accepted:>6}{r.depth:>6}{r.peak:>5}{accuracy:>8}"
        )
    return lines


def faithfulness(rows: Sequence[PeerRow], val: int) -> list[str]:
    """Our ``gepa`` against the PyPI package: seconds per metric call and calls per iteration, the
    latter also without validation gradings (``(1 + accepted) * val``: the seed and every accepted
    child graded on the whole validation slice), which takes the acceptance rate out."""
    by = {r.name: r for r in rows if r.reason is None}
    pypi = by.get("gepa (PyPI)")
    if pypi is None:
        return ["faithfulness: not measured (the PyPI gepa peer did not run)"]

    def loop_calls(r: PeerRow) -> float:
        return r.per(r.calls - (1 + (r.accepted or 0)) * val, r.iterations)

    lines = []
    for name in ("gepa (ours)", "gepa (ours, 1 in flight)"):
        ours = by[name]
        ratios = (
            ours.per(ours.sim_seconds, ours.metric_calls) / pypi.per(pypi.sim_seconds, pypi.metric_calls),
            ours.per(ours.calls, ours.iterations) / pypi.per(pypi.calls, pypi.iterations),
            loop_calls(ours) / loop_calls(pypi),
        )
        verdicts = ["within" if abs(r - 1) <= 0.25 else "outside" for r in ratios]
        lines.append(
            f"faithfulness {name} / gepa (PyPI): s/metric x{ratios[0]:.2f} ({verdicts[0]} 25%), "
            f"calls/iteration x{ratios[1]:.2f} ({verdicts[1]}), without validation gradings "
            f"{loop_calls(ours):.2f} vs {loop_calls(pypi):.2f} x{ratios[2]:.2f} ({verdicts[2]})"
        )
    return lines


def last_line(rows: Sequence[PeerRow], budget: int = PeersArgs().budget) -> str:
    by = {r.name: r for r in rows}

    def by_prefix(prefix: str) -> str:  # a peer's row is named with its installed version
        return next(name for name in by if name.startswith(prefix))

    def overshoot(r: PeerRow) -> str:
        return "nan" if r.reason is not None else str(max(0, r.metric_calls - budget))

    def value(name: str, per_sample: bool) -> str:
        r = by[name]
        if r.reason is not None:
            return "nan"
        return f"{r.per(r.sim_seconds, r.samples if per_sample else r.metric_calls):.3f}"

    return (f"gepa_pypi_s_per_call={value('gepa (PyPI)', False)} gepa_ours_s_per_call={value('gepa (ours)', False)} "
            f"combee_gepa_s_per_call={value('combee-gepa', False)} "
            f"combee_ace_s_per_sample={value('combee ACE', True)} "
            f"sequential_ace_s_per_sample={value('sequential ACE', True)} "
            f"textgrad_pypi_s_per_sample={value(by_prefix('textgrad (PyPI'), True)} "
            f"textgrad_ours_s_per_sample={value('textgrad (ours, 1 in flight)', True)} "
            f"combee_textgrad_s_per_sample={value('combee-textgrad', True)} "
            f"mipro_s_per_metric_call={value(by_prefix('MIPROv2 (DSPy'), False)} "
            f"async_gepa_s_per_call={value('async-gepa', False)} "
            f"async_gepa_overshoot={overshoot(by['async-gepa'])}")


NOTES = (
    "Accuracy (acc): task world, ours only; n/c = not comparable: the endpoint answers the peers' prompts with",
    "text of realistic length and format (sim/peers.py), so their time, calls and depth compare,",
    "their accuracy does not.",
    "gepa (PyPI) with LM callables grades one example at a time (its default adapter batches only litellm model",
    "names), and reflects with one call; our gepa grades a minibatch or validation set concurrently. The",
    "'1 in flight' row runs our loop with one request at a time: that is the like-for-like comparison.",
    "calls/iteration also follows how often a child is accepted (each acceptance grades the whole val slice),",
    "which depends on the answers each endpoint route gives, not on the loop.",
    "textgrad (PyPI) makes 5 calls per example (forward, loss, two backward calls: loss to answer, answer to",
    "prompt, and its step); ours 4 (one gradient call reads the whole conversation); and its step rewrites the",
    "whole prompt (a reply that grows with it) where ours replies with the lines to change. MIPROv2's seconds",
    "are the critical path of its request spans (its litellm client does not report the server's latency);",
    "its iterations are its search trials; only its evaluations run in parallel (its 8 threads: peak 8).",
)


def main() -> None:
    parser = argparse.ArgumentParser(description="Peers side by side on one simulated endpoint")
    defaults = PeersArgs()
    parser.add_argument("--task", default=defaults.task)
    parser.add_argument("--train", type=int, default=defaults.train, help="train examples (slice)")
    parser.add_argument("--val", type=int, default=defaults.val, help="validation examples for GEPA's Pareto set")
    parser.add_argument("--budget", type=int, default=defaults.budget, help="GEPA metric-call budget")
    parser.add_argument("--combee-batch", type=int, default=defaults.combee_batch, help="combee-gepa's minibatch")
    parser.add_argument("--ace-batch", type=int, default=defaults.ace_batch, help="Combee ACE's batch size")
    parser.add_argument("--time-scale", type=float, default=defaults.time_scale)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    ns = parser.parse_args()
    args = PeersArgs(ns.task, ns.train, ns.val, ns.budget, ns.combee_batch, ns.ace_batch, ns.time_scale, ns.seed)
    rows = run(run_peers(args))
    print(f"task {args.task}, preset {PRESET}, {args.train} train / {args.val} val examples, GEPA budget "
          f"{args.budget} metric calls, seed {args.seed}; simulated seconds on the critical path", file=sys.stderr)
    for line in (*table(rows), *NOTES, ACE_FRAMEWORK_NOTE + ".", *faithfulness(rows, args.val)):
        print(line)
    print(last_line(rows, args.budget))


if __name__ == "__main__":
    main()
