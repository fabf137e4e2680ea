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
and DSPy's ``MIPROv2`` (3.4, ``auto="light"``, through ``dspy.LM`` on the endpoint); then the
peers of 2026: TurboGEPA (``turbo-gepa`` 0.1.6: its ``DefaultAdapter`` with its adaptive
defaults, litellm on the endpoint) and AgentDescent (``agentdescent`` 0.7.0: ``evolve`` as its
quickstart runs it, its own client on the endpoint), each stopped once the GEPA budget's metric
calls are spent (through its own stop hook).

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
async_gepa_s_per_call=<j> async_gepa_overshoot=<k> turbo_gepa_s=<l> turbo_gepa_test=<m>
tokens_per_improvement_turbo_gepa=<n> agentdescent_s=<o> agentdescent_test=<p>
tokens_per_improvement_agentdescent=<q> async_gepa_to_best_s=<r> async_gepa_test=<s>
tokens_per_improvement_async_gepa=<t> best_peer_test=<u> async_gepa_s_to_best_peer_test=<v>
async_gepa_first_to_best_peer_test=<0|1> async_gepa_fewer_tokens_per_improvement_than_turbo=<0|1>``
(per metric call for GEPA and MIPROv2, per training sample for ACE and TextGrad; ``k``: the metric
calls ``async-gepa`` made past the budget; a peer not installed: ``turbo_gepa_skipped=not_installed``
in place of ``turbo_gepa_s``, the same for ``agentdescent``, its other figures nan).

The cost table (:func:`cost_table`): for every run, the simulated seconds (critical path of its
spans) until it first sent the prompt it returns as its best (``to best s``: the server notes
when each system message first arrives, :class:`FirstSeen`), that prompt's accuracy on the test
slice (one scorer for every learner's prompt, :func:`prompt_test_accuracy`; our ACE runs: our
evaluation of the final playbook), metric calls, tokens (the server's count over the run's
requests), candidates explored and accepted (each learner's own notion: GEPA's iterations and
accepted children, TurboGEPA's generated and Pareto-promoted mutations, AgentDescent's merge
outcomes and commits) and tokens per accepted candidate. The race: the best test accuracy among
the peers' prompts (PyPI gepa, TurboGEPA, AgentDescent), and when async-gepa first sent a
candidate of its pool scoring at least that, against when each peer first sent its own best.
The figures are checked before they are printed (:func:`check_figures`, :mod:`physics`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import importlib.util
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

# This folder holds scripts named like the peers (bench/textgrad.py): the peers are the installed packages.
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != os.path.dirname(os.path.abspath(__file__))]

from combee_fast.config import EndpointSpec, MapConfig, SessionConfig, TaskConfig, TransportConfig
from combee_fast.endpoint.blocking import BlockingChat
from combee_fast.engine.loop import run
from combee_fast.gepa.candidate import SYSTEM_PROMPT, Candidate
from combee_fast.gepa.interop import CombeeReflectionStrategy
from combee_fast.gepa.settings import GepaConfig
from combee_fast.learners import role_table
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.schema import Example
from combee_fast.session import open_session
from combee_fast.sim.peers import PeerReplies, PeerRouter
from combee_fast.sim.responders import SimRequest
from combee_fast.sim.server import SimServer
from combee_fast.sim.spans import chain_depth, chain_seconds, peak_overlap
from combee_fast.sim.world import TaskWorld
from combee_fast.tasks.registry import get_task

_physics_spec = importlib.util.spec_from_file_location("physics", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                               "physics.py"))
assert _physics_spec is not None and _physics_spec.loader is not None
physics = importlib.util.module_from_spec(_physics_spec)
_physics_spec.loader.exec_module(physics)

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
    tokens: int | None = None
    explored: int | None = None
    test_accuracy: float | None = None
    to_best_s: float | None = None
    span_s: float | None = None  # the critical path of all the run's requests (validation included)

    def tokens_per_improvement(self) -> float | None:
        """Tokens (prompt and completion, every call of the run) per accepted candidate (None:
        not known; inf: nothing accepted)."""
        if self.tokens is None or self.accepted is None:
            return None
        return self.tokens / self.accepted if self.accepted else float("inf")

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
    test: int = 100


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
        "accepted": counts.accepted, "best_prompt": _component(result.best_candidate),
    }


def _component(candidate: Any) -> str:
    """The system prompt of a PyPI gepa candidate (a dict of components)."""
    return str(candidate[SYSTEM_PROMPT]) if isinstance(candidate, dict) else str(candidate)


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


def mipro_missing() -> str | None:
    """Why DSPy's MIPROv2 cannot run here (None: it can): dspy is not installed, or it is without the
    optuna its search needs (the ``dspy`` extra installs dspy alone; the ``bench`` extra, dspy[optuna])."""
    if dspy_version() is None:
        return "dspy is not installed (pip install -e '.[bench]')"
    if importlib.util.find_spec("optuna") is None:
        return "MIPROv2's search needs optuna, not installed (pip install -e '.[bench]')"
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


@dataclass(frozen=True)
class Window:
    """What one run sent to the server: its first request's count (``mark``), its spans (in
    completion order), and the tokens the server counted for them."""

    mark: int
    spans: list[tuple[float, float]]
    tokens: int

    @property
    def depth(self) -> int:
        return chain_depth(self.spans)

    @property
    def peak(self) -> int:
        return peak_overlap(self.spans)

    @property
    def seconds(self) -> float:
        return chain_seconds(self.spans)

    def seconds_until(self, count: int | None) -> float | None:
        """Critical-path simulated seconds of the requests completed before the server had
        completed ``count`` in all (None: ``count`` unknown)."""
        return None if count is None else chain_seconds(self.spans[: max(0, count - self.mark)])


def _tokens(server: SimServer) -> int:
    counters = server.counters()
    return counters.prompt_tokens + counters.completion_tokens


async def _windowed(server: SimServer, work: Callable[[], Any], seen: FirstSeen | None = None) -> tuple[Any, Window]:
    """``work`` run and measured; ``seen`` (when given) starts afresh: its notes are this run's."""
    if seen is not None:
        seen.first.clear()
    mark, tokens = server.span_count(), _tokens(server)
    outcome = await work()
    return outcome, Window(mark, server.spans(mark), _tokens(server) - tokens)


class FirstSeen:
    """A responder in front of the bench's router noting, for each distinct system message, how
    many requests the server had completed when it first arrived: when a learner first sent a
    prompt, i.e. when it held it. ``server`` is set once the server exists."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.server: SimServer | None = None
        self.first: dict[str, int] = {}

    def respond(self, request: SimRequest) -> Any:
        system = "\n".join(m.content or "" for m in request.messages if m.role == "system")
        if system and system not in self.first and self.server is not None:
            self.first[system] = self.server.span_count()
        return self.inner.respond(request)

    def count_at(self, prompt: str, since: int) -> int | None:
        """The completed-request count when a system message holding ``prompt`` first arrived at
        or after ``since`` (None: never)."""
        exact = self.first.get(prompt)
        if exact is not None and exact >= since:
            return exact
        hits = [count for text, count in self.first.items() if count >= since and prompt in text]
        return min(hits) if hits else None


async def prompt_test_accuracy(url: str, prompt: str, task: Any, test_set: Sequence[Example], *,
                               concurrency: int = 32) -> float:
    """``prompt`` as the system message of every ``test_set`` question, sent to the endpoint with
    no role of ours (so :class:`~combee_fast.sim.peers.PeerReplies` answers, the world reading
    the prompt's lessons as for any peer), the text after ``Final answer:`` graded by the task:
    one scorer for every learner's prompt."""
    gate = asyncio.Semaphore(concurrency)

    async def one(client: httpx.AsyncClient, example: Example) -> float:
        async with gate:
            response = await client.post(f"{url}/chat/completions", json={
                "model": "sim", "temperature": 0.0,
                "messages": [{"role": "system", "content": prompt}, {"role": "user", "content": example.input}]})
        response.raise_for_status()
        text = response.json()["choices"][0]["message"]["content"] or ""
        return task.score(example, text.rsplit("Final answer:", 1)[-1].strip()).value

    async with httpx.AsyncClient(timeout=300.0) as client:
        scores = await asyncio.gather(*(one(client, e) for e in test_set))
    return sum(scores) / len(scores) if scores else float("nan")


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """``values`` set in ``os.environ`` for the block, the previous values back after it."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def turbo_gepa_version() -> str | None:
    try:
        return importlib.metadata.version("turbo-gepa")
    except importlib.metadata.PackageNotFoundError:
        return None


def agentdescent_version() -> str | None:
    try:
        return importlib.metadata.version("agentdescent")
    except importlib.metadata.PackageNotFoundError:
        return None


def _graded(task: Any, example: Example, output: str) -> float:
    return float(task.score(example, (output or "").rsplit("Final answer:", 1)[-1].strip()).value)


def run_turbo_gepa(url: str, args: PeersArgs, task: Any, train_set: Sequence[Example]) -> dict[str, Any]:
    """TurboGEPA's ``DefaultAdapter`` with its defaults (``adaptive_config`` for the dataset's
    size: ASHA shards, islands, concurrency; its three reflection strategies) on ``train_set``,
    its task and reflection LM ``openai/sim``: litellm's OpenAI client, pointed at the endpoint
    by ``OPENAI_BASE_URL``. Its quality is our grader's (``eval_fn``, its documented hook for
    non-numeric answers). It has no metric-call budget (``max_evaluations`` counts candidate
    evaluations on a shard), so when ``args.budget`` gradings are done the bench writes the
    ``stop.json`` of its control directory (``TURBOGEPA_CONTROL_PATH``: how its workers are told
    to stop); the gradings already in flight finish. It writes telemetry under ``./.turbo_gepa``
    whatever its directories say, so it runs in a scratch directory (no other run is in flight
    then). Blocking: run it in a thread (its own event loop)."""
    scratch = tempfile.mkdtemp(prefix="turbo-gepa-")
    control = os.path.join(scratch, "control")
    os.makedirs(control)
    with _environment(OPENAI_BASE_URL=url, OPENAI_API_KEY="none", LITELLM_LOCAL_MODEL_COST_MAP="True",
                      TURBOGEPA_CONTROL_PATH=control), contextlib.chdir(scratch):  # it writes ./.turbo_gepa/
        from turbo_gepa.adapters.default_adapter import DefaultAdapter, DefaultDataInst

        logging.getLogger("LiteLLM").setLevel(logging.WARNING)
        by_input = {e.input: e for e in train_set}
        graded = 0

        def eval_fn(output: str, expected: str, example: dict[str, Any]) -> dict[str, float]:
            nonlocal graded
            graded += 1
            if graded == args.budget:
                with open(os.path.join(control, "stop.json"), "w") as stop:
                    stop.write('{"reason": "metric-call budget"}')
            return {"quality": _graded(task, by_input[example["input"]], output)}

        data = [DefaultDataInst(input=e.input, answer=e.target or "", id=f"train-{i}") for i, e in enumerate(train_set)]
        adapter = DefaultAdapter(data, task_lm="openai/sim", reflection_lm="openai/sim", eval_fn=eval_fn,
                                 sampler_seed=args.seed, cache_dir=os.path.join(scratch, "cache"),
                                 log_dir=os.path.join(scratch, "logs"))
        result = asyncio.run(adapter.optimize_async(seeds=[Candidate.seed().render()], display_progress=False))
    stats = result.get("evolution_stats") or {}
    return {"metric_calls": graded, "best_prompt": result.get("best_prompt") or Candidate.seed().render(),
            "explored": int(stats.get("mutations_generated", 0)), "accepted": int(stats.get("mutations_promoted", 0)),
            "rounds": int(stats.get("total_evaluations", 0)), "islands": adapter.config.n_islands,
            "shards": tuple(adapter.config.shards), "concurrency": adapter.config.eval_concurrency,
            "samples": len(train_set)}


AGENTDESCENT_WORKERS = 8
"""AgentDescent's workers and concurrency: its README quickstart's (``n_workers=8, max_concurrency=8``)."""


def run_agentdescent(url: str, args: PeersArgs, task: Any, train_set: Sequence[Example]) -> dict[str, Any]:
    """AgentDescent's ``evolve`` as its README quickstart runs it: a ``SingleSlot`` artifact (the
    system prompt, seeded with ours), ``AGENTDESCENT_WORKERS`` workers and calls in flight, its
    defaults otherwise (held-out gate, ``held_out_frac`` 0.4, the dev-to-stable promotion); its
    reflector is ``reflector(openai_compatible(model="sim"))``, its own urllib client pointed at
    the endpoint by ``OPENAI_BASE_URL``; the solver (``run``, the caller's agent in its design)
    is ours: the artifact as system message, the question as user message. Its reward is our
    grader. It stops at the round barrier once ``args.budget`` gradings are done
    (``stop_when``, its hook for the caller's budget). Blocking: run it in a thread."""
    with _environment(OPENAI_BASE_URL=url, OPENAI_API_KEY="none"):
        from agentdescent import SingleSlot, Task, evolve, openai_compatible, reflector

        by_id = {str(i): e for i, e in enumerate(train_set)}
        graded = 0

        def reward(item: Any, output: str) -> float:
            nonlocal graded
            graded += 1
            return _graded(task, by_id[item.id], output)

        chat = BlockingChat(url, "sim")

        def solve(rendered: str, item: Any) -> str:
            return chat([{"role": "system", "content": rendered}, {"role": "user", "content": item.prompt}])

        tasks = [Task(id=key, prompt=e.input, meta={"gold": e.target}) for key, e in by_id.items()]
        try:
            result = evolve(tasks, reward, run=solve, propose=reflector(openai_compatible(model="sim", max_tokens=1024)),
                            strategy=SingleSlot(initial_value=Candidate.seed().render()),
                            n_workers=AGENTDESCENT_WORKERS, max_concurrency=AGENTDESCENT_WORKERS, rounds=1000,
                            stop_when=lambda info: graded >= args.budget, seed=args.seed,
                            repo_path=tempfile.mkdtemp(prefix="agentdescent-"))
        finally:
            chat.close()
    outcomes = result.outcomes()
    if result.error is not None:
        raise RuntimeError(f"agentdescent's run failed: {result.error}")
    return {"metric_calls": graded, "best_prompt": result.rendered, "explored": sum(outcomes.values()),
            "accepted": int(outcomes.get("committed", 0)), "rounds": len(result.history), "samples": len(train_set),
            "stop_reason": result.stop_reason}


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
        learners={"gepa": GepaConfig(max_metric_calls=args.budget, combee_minibatch=args.combee_batch)}, transport=transport,
        map=workers, endpoints={"default": EndpointSpec(url, "sim")},
    )


@dataclass(frozen=True)
class Probe:
    """What the bench learns of a run besides its counts: the endpoint's first-seen notes
    (``seen``), the test slice and the task that grades it."""

    seen: FirstSeen
    task: Any
    test_set: Sequence[Example]


async def run_ours_gepa(
    server: SimServer, args: PeersArgs, method: str, name: str, probe: Probe, *, concurrency: int | None = None,
    trajectory: list[tuple[float, float]] | None = None,
) -> PeerRow:
    """Our GEPA ``method``; its best candidate scored on the test slice. With ``trajectory``,
    every candidate of its pool is scored too and ``(seconds when first sent, test accuracy)``
    appended, in pool order."""
    config = _session_config(server.url, args, method, val=args.val, concurrency=concurrency)
    async with open_session(config) as session:
        result, window = await _windowed(server, lambda: session.train(), probe.seen)
    best = result.best.render()
    test = await prompt_test_accuracy(server.url, best, probe.task, probe.test_set)
    if trajectory is not None:
        for candidate in result.artifact.candidates:
            seconds = window.seconds_until(probe.seen.count_at(candidate.render(), window.mark))
            accuracy = await prompt_test_accuracy(server.url, candidate.render(), probe.task, probe.test_set)
            trajectory.append((seconds if seconds is not None else float("nan"), accuracy))
    return PeerRow(
        name, result.train_sim_seconds, result.samples, result.summary["metric_calls"], result.calls,
        result.steps - 1, window.depth, window.peak, result.best_val_accuracy, result.summary["accepted"],
        tokens=window.tokens, span_s=window.seconds, explored=result.summary.get("candidates_explored"), test_accuracy=test,
        to_best_s=window.seconds_until(probe.seen.count_at(best, window.mark)),
    )


async def run_ours_ace(server: SimServer, args: PeersArgs, method: str, batch: int, probe: Probe) -> PeerRow:
    """Our ACE ``method`` at ``batch``; its final playbook scored on the test slice by our
    evaluation (the world's generator; a playbook is not a system prompt), reached at the run's end."""
    config = _session_config(server.url, args, method, val=0)  # no validation: every call is learning
    async with open_session(config) as session:
        result, window = await _windowed(server, lambda: session.train(plan=FixedBatch(batch)), probe.seen)
        test = await session.evaluate(result.final, probe.test_set)
    return PeerRow(
        f"{method} ACE", result.train_sim_seconds, result.samples, result.rollouts, result.calls, result.steps,
        window.depth, window.peak, accepted=result.summary.get("candidates_accepted"), tokens=window.tokens, span_s=window.seconds,
        explored=result.summary.get("candidates_explored"), test_accuracy=test.accuracy, to_best_s=window.seconds,
    )


async def run_new_peers(server: SimServer, args: PeersArgs, probe: Probe, train_set: Sequence[Example]) -> list[PeerRow]:
    """TurboGEPA and AgentDescent (the peers of 2026), each on the same train slice and
    metric-call budget; a peer that is not installed gets a row saying so. Seconds are the
    critical path of their spans (their clients do not report the server's latency)."""
    rows: list[PeerRow] = []
    peers: tuple[tuple[str, str | None, Callable[..., dict[str, Any]]], ...] = (
        ("TurboGEPA", turbo_gepa_version(), run_turbo_gepa), ("AgentDescent", agentdescent_version(), run_agentdescent))
    for name, version, runner in peers:
        package = name.lower().replace("turbogepa", "turbo-gepa")
        if version is None:
            rows.append(PeerRow(f"{name} ({package})", reason=f"cannot run: {package} is not installed "
                                "(pip install -e '.[bench]')"))
            continue
        got, window = await _windowed(server, lambda runner=runner: asyncio.to_thread(  # type: ignore[misc]
            runner, server.url, args, probe.task, train_set), probe.seen)
        test = await prompt_test_accuracy(server.url, got["best_prompt"], probe.task, probe.test_set)
        rows.append(PeerRow(f"{name} ({package} {version})", window.seconds, got["samples"], got["metric_calls"],
                            len(window.spans), got["rounds"], window.depth, window.peak, accepted=got["accepted"],
                            comparable=False, tokens=window.tokens, span_s=window.seconds, explored=got["explored"], test_accuracy=test,
                            to_best_s=window.seconds_until(probe.seen.count_at(got["best_prompt"], window.mark))))
    return rows


async def run_ours_textgrad(server: SimServer, args: PeersArgs, method: str, batch: int, name: str, *,
                            concurrency: int | None = None) -> PeerRow:
    config = _session_config(server.url, args, method, val=0, concurrency=concurrency)  # every call is learning
    async with open_session(config) as session:
        result, window = await _windowed(server, lambda: session.train(plan=FixedBatch(batch)))
    return PeerRow(name, result.train_sim_seconds, result.samples, result.rollouts, result.calls, result.steps,
                   window.depth, window.peak, tokens=window.tokens, span_s=window.seconds)


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
        got, window = await _windowed(server, lambda: asyncio.to_thread(run_textgrad_pypi, server.url, task,
                                                                         train_set))
        rows.append(PeerRow(f"textgrad (PyPI {importlib.metadata.version('textgrad')})", got["sim_seconds"],
                            got["samples"], got["samples"], got["calls"], got["steps"], window.depth, window.peak,
                            comparable=False, tokens=window.tokens, span_s=window.seconds))
    rows.append(await run_ours_textgrad(server, args, "textgrad", 1, "textgrad (ours, 1 in flight)", concurrency=1))
    rows.append(await run_ours_textgrad(server, args, "combee-textgrad", args.ace_batch, "combee-textgrad"))
    missing = mipro_missing()
    if missing is not None:
        rows.append(PeerRow("MIPROv2 (DSPy)", reason=f"cannot run: {missing}"))
        return rows
    got, window = await _windowed(server, lambda: asyncio.to_thread(run_mipro, server.url, task, train_set, val_set,
                                                                     seed=args.seed))
    rows.append(PeerRow(f"MIPROv2 (DSPy {dspy_version()})", window.seconds, got["samples"], got["metric_calls"],
                        len(window.spans), got["trials"], window.depth, window.peak, comparable=False,
                        tokens=window.tokens, span_s=window.seconds))
    return rows


async def run_peers(args: PeersArgs, trajectory: list[tuple[float, float]] | None = None) -> list[PeerRow]:
    """Every peer on one endpoint, in order; a peer that cannot run gets a row with its reason.
    ``trajectory`` (when given) receives async-gepa's candidates as ``(seconds when first sent,
    test accuracy)``."""
    task = get_task(args.task)
    train_set = task.load("train").examples[: args.train]
    val_set = task.load("val").examples[: args.val]
    test_set = task.load("test").examples[: args.test]
    table = role_table()
    world = TaskWorld.for_task(task, roles=table)  # the ACE, GEPA and TextGrad roles
    rows: list[PeerRow] = []
    seen = FirstSeen(PeerRouter(world, PeerReplies(world), table.responders))
    probe = Probe(seen, task, test_set)
    async with SimServer(seen, preset=PRESET, time_scale=args.time_scale, seed=args.seed) as server:
        seen.server = server
        for name, combee in (("gepa (PyPI)", False), ("gepa (PyPI) + Combee refl.", True)):
            if not gepa_pypi_available():
                rows.append(PeerRow(name, reason="cannot run: the gepa package is not installed "
                                    "(pip install -e '.[bench]')"))
                continue
            got, window = await _windowed(server, lambda: asyncio.to_thread(
                run_gepa_pypi, server.url, args, train_set, val_set, combee=combee), seen)
            test = await prompt_test_accuracy(server.url, got["best_prompt"], task, test_set)
            rows.append(PeerRow(name, got["sim_seconds"], got["samples"], got["metric_calls"], got["calls"],
                                got["iterations"], window.depth, window.peak, accepted=got["accepted"],
                                comparable=False, tokens=window.tokens, span_s=window.seconds, explored=got["iterations"], test_accuracy=test,
                                to_best_s=window.seconds_until(seen.count_at(got["best_prompt"], window.mark))))
        rows.append(await run_ours_gepa(server, args, "gepa", "gepa (ours)", probe))
        rows.append(await run_ours_gepa(server, args, "gepa", "gepa (ours, 1 in flight)", probe, concurrency=1))
        rows.append(await run_ours_gepa(server, args, "combee-gepa", "combee-gepa", probe))
        rows.append(await run_ours_gepa(server, args, "async-gepa", "async-gepa", probe, trajectory=trajectory))
        rows.append(await run_ours_ace(server, args, "sequential", 1, probe))
        rows.append(await run_ours_ace(server, args, "combee", args.ace_batch, probe))
        if ace_framework_version() is None:
            rows.append(PeerRow("ACE (ace-framework)", reason="cannot run: ace-framework is not installed "
                                "(pip install -e '.[bench]'); " + ACE_FRAMEWORK_NOTE))
        else:
            got, window = await _windowed(server, lambda: asyncio.to_thread(run_ace_framework, server.url, train_set))
            rows.append(PeerRow(f"ACE (ace-framework {ace_framework_version()})", got["sim_seconds"], got["samples"],
                                got["samples"], got["calls"], got["samples"], window.depth, window.peak,
                                comparable=False, tokens=window.tokens, span_s=window.seconds))
        rows += await run_prompt_peers(server, args, task, train_set, val_set)
        rows += await run_new_peers(server, args, probe, train_set)
    return rows


def table(rows: Sequence[PeerRow]) -> list[str]:
    """The printed table, one line per peer."""
    lines = [f"{'peer':<34}{'sim s':>8}{'s/sample':>10}{'s/metric':>10}{'calls/smp':>10}{'calls/it':>9}"
             f"{'iters':>6}{'acc.d':>6}{'depth':>6}{'peak':>5}{'val acc':>8}"]
    for r in rows:
        if r.reason is not None:
            lines.append(f"{r.name:<34}{r.reason}")
            continue
        accuracy = "n/c" if not r.comparable else f"{r.accuracy:.3f}" if r.accuracy is not None else "-"
        accepted = "-" if r.accepted is None else str(r.accepted)
        lines.append(
            f"{r.name:<34}{r.sim_seconds:>8.0f}{r.per(r.sim_seconds, r.samples):>10.2f}"
            f"{r.per(r.sim_seconds, r.metric_calls):>10.3f}{r.per(r.calls, r.samples):>10.2f}"
            f"{r.per(r.calls, r.iterations):>9.2f}{r.iterations:>6}{accepted:>6}{r.depth:>6}{r.peak:>5}{accuracy:>8}"
        )
    return lines


def _shown(value: float | int | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def cost_table(rows: Sequence[PeerRow]) -> list[str]:
    """What each run reached and what it cost: the critical path of all its requests in simulated
    seconds (``run s``: validation included, so above our runs' ``sim s``, which is the training
    steps'), the same until it first sent the prompt it returned, that prompt's test accuracy (one scorer for all:
    :func:`prompt_test_accuracy`; ACE: our evaluation of the final playbook), metric calls, tokens
    (the server's count of every request of the run), candidates explored and accepted, tokens
    per accepted candidate."""
    lines = [f"{'peer':<34}{'run s':>7}{'to best s':>10}{'test acc':>9}{'metric':>8}{'tokens':>12}{'explored':>9}"
             f"{'accepted':>9}{'tokens/acc.':>12}"]
    for r in rows:
        if r.reason is not None:
            lines.append(f"{r.name:<34}{r.reason}")
            continue
        lines.append(f"{r.name:<34}{_shown(r.span_s, '.0f'):>7}{_shown(r.to_best_s, '.0f'):>10}{_shown(r.test_accuracy, '.3f'):>9}"
                     f"{r.metric_calls:>8}{_shown(r.tokens, ','):>12}{_shown(r.explored, 'd'):>9}"
                     f"{_shown(r.accepted, 'd'):>9}{_shown(r.tokens_per_improvement(), ',.0f'):>12}")
    return lines


def external_prompt_peers(rows: Sequence[PeerRow]) -> list[PeerRow]:
    """The peers (other people's packages) that return a prompt scored on the test slice: the
    PyPI gepa (its own reflection), TurboGEPA and AgentDescent."""
    return [r for r in rows if r.reason is None and r.test_accuracy is not None
            and (r.name == "gepa (PyPI)" or r.name.startswith(("TurboGEPA", "AgentDescent")))]


@dataclass(frozen=True)
class Race:
    """The race to the best peer test accuracy (``target``): when async-gepa first sent a
    candidate of its pool scoring at least that (``ours_s``; None: none did), when each peer did
    (``peers_s``: its seconds to its own best if that best reaches the target, else None: never),
    and whether async-gepa got there sooner than every peer (``first``)."""

    target: float | None
    ours_s: float | None
    peers_s: dict[str, float | None]
    first: bool | None


def race(rows: Sequence[PeerRow], trajectory: Sequence[tuple[float, float]]) -> Race:
    peers = external_prompt_peers(rows)
    if not peers or not trajectory:
        return Race(None, None, {}, None)
    target = max(p.test_accuracy or 0.0 for p in peers)
    reached = [seconds for seconds, accuracy in trajectory if accuracy >= target and seconds == seconds]
    ours = min(reached) if reached else None
    peers_s = {p.name: p.to_best_s if (p.test_accuracy or 0.0) >= target else None for p in peers}
    first = ours is not None and all(theirs is None or ours < theirs for theirs in peers_s.values())
    return Race(target, ours, peers_s, first)


def check_figures(rows: Sequence[PeerRow], budget: int) -> None:
    """Refuse figures that cannot be (:mod:`physics`): an accuracy outside [0, 1], negative
    seconds to a best or more than its run's, more accepted than explored candidates, a run with calls and no tokens,
    async-gepa past its budget (it reserves at dispatch)."""
    for r in rows:
        if r.reason is not None:
            continue
        for what, value in (("test accuracy", r.test_accuracy), ("val accuracy", r.accuracy)):
            if value is not None:
                physics.check_range(f"{r.name} {what}", value, 0.0, 1.0)
        if r.to_best_s is not None:
            physics.check_range(f"{r.name} seconds to its best", r.to_best_s, 0.0,
                                float("inf") if r.span_s is None else r.span_s * (1 + 1e-9))
        if r.explored is not None and r.accepted is not None:
            physics.check_range(f"{r.name} accepted candidates", r.accepted, 0, r.explored)
        if r.tokens is not None and r.calls > 0:
            physics.check_range(f"{r.name} tokens", r.tokens, 1, float("inf"))
        if r.name == "async-gepa":
            physics.check_range("async-gepa metric calls", r.metric_calls, 0, budget)


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


def last_line(rows: Sequence[PeerRow], budget: int = PeersArgs().budget,
              trajectory: Sequence[tuple[float, float]] = ()) -> str:
    by = {r.name: r for r in rows}

    def by_prefix(prefix: str) -> str:  # a peer's row is named with its installed version
        return next(name for name in by if name.startswith(prefix))

    def number(value: float | None, spec: str = ".3f") -> str:
        return "nan" if value is None else format(value, spec)

    def new_peer(key: str, prefix: str) -> str:
        r = by[by_prefix(prefix)]
        if r.reason is not None:
            why = "not_installed" if "not installed" in r.reason else "cannot_run"  # the row says more
            return f"{key}_skipped={why} {key}_test=nan tokens_per_improvement_{key}=nan"
        return (f"{key}_s={number(r.to_best_s, '.1f')} {key}_test={number(r.test_accuracy)} "
                f"tokens_per_improvement_{key}={number(r.tokens_per_improvement(), '.0f')}")

    ours = by["async-gepa"]
    outcome = race(rows, trajectory)
    turbo = by[by_prefix("TurboGEPA")]
    fewer = ("nan" if turbo.reason is not None or turbo.tokens_per_improvement() is None
             or ours.tokens_per_improvement() is None
             else str(int((ours.tokens_per_improvement() or 0) < (turbo.tokens_per_improvement() or 0))))

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
            f"async_gepa_overshoot={overshoot(by['async-gepa'])} "
            f"{new_peer('turbo_gepa', 'TurboGEPA')} {new_peer('agentdescent', 'AgentDescent')} "
            f"async_gepa_to_best_s={number(ours.to_best_s, '.1f')} async_gepa_test={number(ours.test_accuracy)} "
            f"tokens_per_improvement_async_gepa={number(ours.tokens_per_improvement(), '.0f')} "
            f"best_peer_test={number(outcome.target)} async_gepa_s_to_best_peer_test={number(outcome.ours_s, '.1f')} "
            f"async_gepa_first_to_best_peer_test={'nan' if outcome.first is None else int(outcome.first)} "
            f"async_gepa_fewer_tokens_per_improvement_than_turbo={fewer}")


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


def main() -> int:
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
    parser.add_argument("--test", type=int, default=defaults.test, help="test examples each best prompt is scored on")
    ns = parser.parse_args()
    args = PeersArgs(ns.task, ns.train, ns.val, ns.budget, ns.combee_batch, ns.ace_batch, ns.time_scale, ns.seed,
                     ns.test)
    trajectory: list[tuple[float, float]] = []
    rows = run(run_peers(args, trajectory))
    check_figures(rows, args.budget)
    print(f"task {args.task}, preset {PRESET}, {args.train} train / {args.val} val examples, GEPA budget "
          f"{args.budget} metric calls, seed {args.seed}; simulated seconds on the critical path", file=sys.stderr)
    for line in (*table(rows), "", *cost_table(rows), "", *NOTES, ACE_FRAMEWORK_NOTE + ".",
                 *faithfulness(rows, args.val), *race_lines(rows, trajectory)):
        print(line)
    print(last_line(rows, args.budget, trajectory))
    return 0


def race_lines(rows: Sequence[PeerRow], trajectory: Sequence[tuple[float, float]]) -> list[str]:
    outcome = race(rows, trajectory)
    if outcome.target is None:
        return ["race: not measured (no external prompt peer ran)"]
    peers = ", ".join(f"{p.name} {_shown(p.to_best_s, '.0f')} s to its best {p.test_accuracy:.3f}"
                      for p in external_prompt_peers(rows))
    there = ", ".join(f"{name} {'never' if seconds is None else f'after {seconds:.0f} s'}"
                      for name, seconds in outcome.peers_s.items())
    reached = "never" if outcome.ours_s is None else f"after {outcome.ours_s:.0f} s"
    return [f"race to the best peer test accuracy {outcome.target:.3f}: async-gepa {reached}; {there}; "
            f"async-gepa first: {'yes' if outcome.first else 'no'} (the peers: {peers})"]


if __name__ == "__main__":
    sys.exit(physics.guarded(main, "bench/peers.py"))
