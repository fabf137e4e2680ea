"""A learning session: one :class:`~combee_fast.config.SessionConfig` in, endpoints opened, a
learner's method trained, out.

Roles without an endpoint URL are served by the local llama.cpp server (``config.local``) or
else the in-process simulated endpoint playing the task world (so a run needs no GPU, network or
key). A task with an environment (or a run given ``--agent``/``--env``) makes its attempts as
agent episodes, run by the rollout executor of ``executor.backend`` (opened with the session,
its capacity the map's width) through a :class:`~combee_fast.rollouts.journal.TrajectoryJournal`.
The CLI, the demo and the benchmarks all go through :func:`open_session` and
:meth:`Session.train`: a library user gets exactly what the CLI does, the batch-size controller
included (``TrainConfig.batch_size=None``), whatever the learner.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import msgspec

from combee_fast.config import AgentConfig, SessionConfig
from combee_fast.endpoint.batching import (PROBE_MESSAGES, PROBE_ROLE, BatchingCurve, measure_batching, not_probed,
                                           probe_cap)
from combee_fast.endpoint.cache import CacheMode, ReplayCache
from combee_fast.endpoint.calls import ChatResult
from combee_fast.endpoint.capabilities import root_url
from combee_fast.endpoint.client import EndpointClient
from combee_fast.endpoint.server_work import ServerWork, read_server_work, work_since
from combee_fast.errors import CheckpointError, CombeeError, ConfigError
from combee_fast.kinds import Kind
from combee_fast.learners import LEARNERS, Choice, resolve, run_roles, settled
from combee_fast.methods.base import EvalResult
from combee_fast.money.cost import SIMULATED_GPUS, GpuClock
from combee_fast.money.dollars import Price, role_prices
from combee_fast.protocols.learning import LearnContext
from combee_fast.protocols.rollouts import EnvironmentTask
from combee_fast.protocols.running import BatchPlan, Budget, Method, StopRule
from combee_fast.protocols.tasks import Task
from combee_fast.readout.notices import rerun_notice
from combee_fast.readout.progress import Progress
from combee_fast.readout.report import RunFacts, curve_png, run_report
from combee_fast.readout.summary import RerunCount, failed_summary, run_summary, shown_at
from combee_fast.record.checkpoint import StoredCheckpoint
from combee_fast.record.concurrency import Gauges
from combee_fast.record.ledger import LedgerRow
from combee_fast.record.provenance import Provenance, provenance
from combee_fast.record.rundir import CURVE_FILE, RunDir
from combee_fast.record.state import CallsRecord, TrainState
from combee_fast.record.usage import SplitUsage, append_usage, usage_entry
from combee_fast.redact import scrub, strip_userinfo
from combee_fast.roles.calls import RoleCalls
from combee_fast.roles.clients import Fallback, RoleClients, RoleMap, open_role_clients
from combee_fast.roles.spec import Role, task_roles
from combee_fast.roles.workload import workload_prompts
from combee_fast.rollouts.attempts import EpisodeAttempts
from combee_fast.rollouts.journal import TrajectoryJournal
from combee_fast.rollouts.spec import BUILT_IN_AGENT, RolloutSpec, uses_agents
from combee_fast.run.batch_plans import ControllerPlan, FixedBatch, LivePlan, ReplayedPlan
from combee_fast.run.events import Events, StepDone, on_kind
from combee_fast.run.interrupt import StopRequest
from combee_fast.run.stops import (FailingCalls, FailingEpisodes, Interrupted, NoImprovement, NothingKept,
                                   ScoreThreshold, UnansweredValidation, WallClock)
from combee_fast.run.train import Training, TrainResult, train
from combee_fast.schema import Example, Message
from combee_fast.sim.server import SimServer
from combee_fast.sim.worlds import task_world
from combee_fast.tasks.base import Split
from combee_fast.tasks.heldout import check_disjoint, check_use
from combee_fast.tasks.registry import get_task


class Session:
    """Open endpoints and loaded splits for one configuration; ``choice`` is its learner and
    method (:func:`combee_fast.learners.resolve`); ``calls`` the role calls of the learner's
    declared roles; ``local`` the local server, if it started one; ``episodes`` the rollout
    executor of agent episodes (None: attempts are single calls); ``events`` the hub its
    endpoints, role calls and episodes emit on."""

    def __init__(
        self, config: SessionConfig, task: Task, train_split: Split, val_split: Split, calls: RoleCalls,
        server: SimServer | None, local: Any = None, episodes: TrajectoryJournal | None = None,
    ) -> None:
        self.config = config
        self.task = task
        self.train_split = train_split
        self.val_split = val_split
        self.calls = calls
        self.server = server
        self.local = local
        self.episodes = episodes
        self.choice = resolve(config.learner, config.method)
        self.batching = not_probed("only the live planner (--batch-size auto) probes")
        """The start-up probe's batching curve (:meth:`probe_batching`), which the run's result carries."""

    @property
    def clients(self) -> RoleClients:
        return self.calls.clients

    @property
    def events(self) -> Events:
        """The session's hub: what its endpoints (waits, overloads), role calls (failed calls) and
        episodes (finished, failed, re-run) emit, outside a run too; a run's own hub hears them
        while it trains (:meth:`train`)."""
        return self.calls.events

    @property
    def learns_from_traces(self) -> bool:
        """True for tasks whose rollouts already exist (the map only reflects)."""
        return self.task.rollout_source() is not None

    @property
    def context(self) -> LearnContext:
        """What the learner builds its methods and evaluation from."""
        return LearnContext(self.config, self.task, self.calls, self.val_split.examples, self.learns_from_traces,
                            self.attempts())

    def attempts(self) -> EpisodeAttempts | None:
        """Attempts as agent episodes on this session's executor, for its learner (None: the run's
        attempts are single calls): the agent's turns are made as the learner's serving role."""
        if self.episodes is None:
            return None
        return EpisodeAttempts(self.episodes, seed=self.config.seed, role=self.calls.serving().key,
                               citable=self.choice.kind.citable)

    def resolve(self, method: str | None = None) -> Choice:
        """The configured learner and method, or ``method`` (a name or alias) on the configured learner."""
        return self.choice if method is None else resolve(self.config.learner, method)

    def method(self, name: str | None = None) -> Method[Any]:
        """The learning method ``name`` (default: the configured one) on this session's roles."""
        choice = self.resolve(name)
        return choice.kind.build_method(choice.method, self.context)

    def train_items(self) -> tuple[Any, ...]:
        """The items a step learns from: the train split's examples, or its collected rollouts."""
        source = self.task.rollout_source()
        if source is not None:
            return tuple(source.load_rollouts(self.config.task.train_split))
        return self.train_split.examples

    def budget(self, method: str | None = None) -> Budget | None:
        """What a run of ``method`` (default: the configured one) spends towards its end (train
        samples over the epochs; GEPA: metric calls), from the learner's stop rules; None when
        they say nothing of it."""
        choice = self.resolve(method)
        items = len(self.train_items())
        for rule in choice.kind.stop_rules(self.config):
            if (budget := rule.budget(items)) is not None:
                return budget
        return None

    def reports_simulated_time(self) -> bool:
        """Whether the calls' latencies are simulated seconds: the in-process simulated endpoint,
        or a simulated server that said its time scale."""
        return self.server is not None or any(client.time_scale is not None for client in self.clients.every_replica())

    def progress(self, method: str | None = None, **options: Any) -> Progress:
        """A :class:`~combee_fast.readout.progress.Progress` view of a run of ``method`` (subscribe it
        to the run's events); ``options`` go to it (``stream``, ``live``)."""
        choice = self.resolve(method)
        return Progress(label=choice.shown, budget=self.budget(method),
                        size_unit=choice.kind.size_unit, simulated=self.reports_simulated_time,
                        **options)

    def split_uses(self, declared: Mapping[str, str] | None = None) -> list[tuple[Split, str, str]]:
        """``(split, role, use)`` for every use training makes of a split: the train split is
        learned from (and, with the controller, the batch size is tuned on its steps); the
        validation split selects the best artifact. :class:`ConfigError` (from
        :func:`~combee_fast.tasks.heldout.check_use` and
        :func:`~combee_fast.tasks.heldout.check_disjoint`) when a use falls on a test split, or on
        a split sharing rows with one by content. ``declared``: split roles an experiment card
        declares over the task's own."""
        task, names = self.task, self.config.task
        uses = [(self.train_split, check_use(task, names.train_split, "train", declared), "train")]
        if self.choice.kind.batch_size(self.choice.method, self.config) is None:
            uses.append((self.train_split, check_use(task, names.train_split, "tune", declared), "tune"))
        uses.append((self.val_split, check_use(task, names.val_split, "select", declared), "select"))
        for split, _, use in uses:
            check_disjoint(task, split, use, declared)
        return uses

    async def batch_plan(self, run_dir: RunDir | None = None, *, method: str | None = None) -> BatchPlan:
        """The configured plan: an earlier run's decisions (``train.plan_from``), the method's fixed
        batch size, or (None) the live planner (the learner's own when it has one,
        :meth:`~combee_fast.protocols.CompleteKind.live_plan`), or (``controller.mode = "paper"``)
        the paper's rule, bounded by the simulated server's running-sequence capacity when it has
        one. Both planners stay within ``controller.max_batch``."""
        config, choice = self.config, self.resolve(method)
        kind = choice.kind
        if config.train.plan_from is not None:
            return ReplayedPlan.load(config.train.plan_from, knob=self.calls, run_dir=run_dir)
        size = kind.batch_size(choice.method, config)
        if size is not None:
            return FixedBatch(size)
        if config.controller.mode == "live":  # the endpoint's capacity is measured, not read from a preset
            own = kind.live_plan(choice.method, config, run_dir)
            if own is not None:
                return own
            replicas = self.clients.replicas(kind.rollout_role)
            in_flight_cap = min(config.map.workers, sum(min(c.gate.limit, c.config.transport.concurrency)
                                                        for c in replicas))
            return await LivePlan.start(config.controller, config.combee, workers=config.map.workers,
                                        lessons=kind.lessons, rollout_role=kind.rollout_role, knob=self.calls,
                                        run_dir=run_dir, events=self.events, in_flight_cap=in_flight_cap,
                                        probe=await self.probe_batching(kind.rollout_role, run_dir))
        capacity = self.server.preset.max_running if self.server is not None else None
        return await ControllerPlan.start(config.controller, capacity=capacity, lessons=kind.lessons, run_dir=run_dir,
                                          events=self.events)

    async def probe_batching(self, role: str, run_dir: RunDir | None = None) -> BatchingCurve:
        """The batching curve of the endpoint serving ``role`` (its first replica), measured by
        :func:`~combee_fast.endpoint.batching.measure_batching` within ``controller.probe_s`` (its
        calls counted in ``calls.json`` as ``probe``), kept in :attr:`batching` and written to
        ``run_dir``'s ``batching.json``. A resumed run reads the curve its first session recorded
        instead; a replayed run's probe is answered by its replay cache. Not probed: the
        in-process simulated endpoint (the yardstick: its figures stay as they are) and
        ``controller.probe_s = 0``. A probe cut short by the budget or a failed call says so in
        one line on stderr; without a single level measured the planner starts cold."""
        controller = self.config.controller
        resumed = run_dir if run_dir is not None and run_dir.resumed is not None else None
        client = self.clients.replicas(role)[0]
        if resumed is not None:
            curve = resumed.read_batching() or not_probed("the run's first session recorded no batching curve")
        elif controller.probe_s <= 0:
            curve = not_probed("controller.probe_s = 0")
        elif self.server is not None and client.config.base_url == self.server.url:
            curve = not_probed("the in-process simulated endpoint")
        else:
            curve = await measure_batching(client, budget_s=controller.probe_s, max_tokens=controller.probe_tokens,
                                           record=self._probe_call, prompts=self.workload_prompts(role, client))
            if curve.why:
                cold = "" if curve.points else "; the planner starts cold"
                print(f"combee: {curve.why}{cold}", file=sys.stderr)
        self.batching = curve
        if run_dir is not None and resumed is None:
            run_dir.write_batching(curve)
        return curve

    def workload_prompts(self, role: str, client: EndpointClient) -> list[tuple[Message, ...]]:
        """The prompts the start-up probe sends as ``role`` (:mod:`combee_fast.roles.workload`): the
        role's instructions, the learned context the run starts from, and the inputs of the train
        split's first examples, one a request, as many as the probe may send (a level of each size
        up to its cap); its short counting prompt when the task has no inputs (collected
        rollouts)."""
        kind = self.choice.kind
        declared = next(r for r in kind.roles if r.key == role)
        inputs = [example.input for example in self.train_split.examples[:2 * probe_cap(client)]]
        if not inputs:
            return [PROBE_MESSAGES]
        context = kind.deployable(kind.initial(self.config)).render()
        return workload_prompts(declared, context, inputs)

    def _probe_call(self, result: ChatResult) -> None:
        """Count one call of the batching probe in the run's calls (a cut answer is what it asked for)."""
        error = result.error if result.error is not None and result.error.kind != "truncated" else None
        self.calls.note(PROBE_ROLE, error, result.text)

    def stop_rules(self, choice: Choice, *, interrupt: StopRequest | None = None,
                   extra: Sequence[StopRule] = ()) -> list[StopRule]:
        """The learner's own rules, ``extra`` (e.g. a card's budget), the configured stoppers, the
        interrupt, then the failure rules."""
        train = self.config.train
        rules: list[StopRule] = [*choice.kind.stop_rules(self.config), *extra]
        if train.patience is not None:
            rules.append(NoImprovement(train.patience))
        if train.target_score is not None:
            rules.append(ScoreThreshold(train.target_score))
        if train.max_wall_s is not None:
            rules.append(WallClock(train.max_wall_s))
        if interrupt is not None:
            rules.append(Interrupted(interrupt))
        return [*rules, FailingCalls(max_failed_fraction=train.max_failed_fraction,
                                     min_judged_calls=train.min_judged_calls, learning_roles=choice.kind.learning_roles),
                FailingEpisodes(max_failed_fraction=train.max_failed_fraction, min_judged_calls=train.min_judged_calls),
                UnansweredValidation(max_failed_fraction=train.max_failed_fraction),
                NothingKept(f"token_budget={self.config.token_budget} may hold none of them"
                            if self.config.token_budget is not None else "")]

    async def train(
        self,
        *,
        method: str | Method[Any] | None = None,
        plan: BatchPlan | None = None,
        out: str | os.PathLike[str] | None = None,
        overwrite: bool = False,
        run_dir: RunDir | None = None,
        on_step: Callable[[LedgerRow], None] | None = None,
        artifact: Any = None,
        usage: SplitUsage | None = None,
        gpus: int | None = None,
        interrupt: StopRequest | None = None,
        stops: Sequence[StopRule] = (),
        events: Events | None = None,
    ) -> TrainResult:
        """Train the configured (or named) method of the configured learner; ``plan`` overrides
        the configured batch plan, ``artifact`` the learner's starting artifact. ``method`` may
        also be a :class:`~combee_fast.protocols.Method` built on this session (e.g. one of
        :meth:`method` wrapped to watch its steps).

        With ``out`` (a folder; one holding a run is refused unless ``overwrite``), the run writes
        the run folder ``combee learn --out`` writes, by the same code: everything ``run_dir``
        below brings, then ``summary.json`` (:func:`~combee_fast.readout.summary.run_summary`; a run
        that raised a :class:`~combee_fast.errors.CombeeError` once started:
        :func:`~combee_fast.readout.summary.failed_summary`) and the local server's log; the folder is
        closed when ``train`` returns. ``combee show``, ``combee compare`` and ``combee learn
        --resume`` read it. ``out`` and ``run_dir`` (an open run directory, left open) exclude each
        other.

        With ``run_dir``, ``config.json``, ``splits.json`` and ``capabilities.json`` are written
        and the run directory is moved into place (:meth:`RunDir.start`) before the first step;
        every failed call goes to its ``errors.jsonl`` as it happens (its record,
        :class:`~combee_fast.run.recorder.RunRecord`, is a critical consumer); ``calls.json`` and
        ``capabilities.json`` are written at the end. A run directory reopened by
        :meth:`RunDir.reopen` resumes its run from its checkpoint (``artifact`` is then ignored).

        Refuses (:class:`ConfigError`) to learn, select or tune on a test split (see
        :meth:`split_uses`). With ``usage`` (a run under an experiment card) the card's split
        roles apply, every use is appended to the card's usage record before training starts,
        and the card is copied into ``run_dir`` as ``card.toml``.

        Each ledger row holds its step's GPU-seconds: the simulated server's busy time times
        ``gpus`` (default :data:`~combee_fast.money.cost.SIMULATED_GPUS`), or on real endpoints the
        step's wall time times ``gpus`` (unknown, ``None``, when ``gpus`` is not given).

        ``interrupt`` ends the run after the step in flight once requested (SIGINT, SIGTERM);
        ``stops`` are more stop rules (e.g. a card's budget: :class:`~combee_fast.verify.budget.BudgetGuard`).
        ``events`` (a hub of the run's own; default: a new one) receives the run's
        :mod:`~combee_fast.run.events`: every step, version and the stop, and what the session's
        hub (:attr:`events`) hears while the run trains (failed calls, waits, episodes);
        ``on_step`` is told each ledger row.

        With agent episodes, every finished trajectory goes to the run directory's
        ``trajectories.jsonl`` (an ``EpisodeFinished`` event) and every failed one to
        ``errors.jsonl`` (an ``EpisodeFailed`` event); an episode re-run after its worker was lost
        is a line of ``errors.jsonl`` and one on stderr. A resumed run takes the episodes it had
        finished since its checkpoint's previous step from ``trajectories.jsonl`` instead of
        running them again.
        """
        if events is self.events:
            raise ValueError("Session.train(events=...): give the run a hub of its own; the session's hub "
                             "(Session.events) already reaches it while it trains")
        if out is None:
            return await self._train(method=method, plan=plan, run_dir=run_dir, on_step=on_step, artifact=artifact,
                                     usage=usage, gpus=gpus, interrupt=interrupt, stops=stops, events=events)
        if run_dir is not None:
            raise ValueError("Session.train: give out= (a folder the run writes) or run_dir= (an open RunDir), "
                             "not both")
        folder = RunDir(out, overwrite=overwrite)
        reruns = RerunCount()
        events = events if events is not None else Events()
        events.subscribe(reruns)
        try:
            result = await self._train(method=method, plan=plan, run_dir=folder, on_step=on_step, artifact=artifact,
                                       usage=usage, gpus=gpus, interrupt=interrupt, stops=stops, events=events)
            folder.write_summary(run_summary(result, shown_at(out, folder), reruns=reruns.count,
                                             interrupted_by=interrupt.requested if interrupt is not None else None))
            return result
        except CombeeError as exc:
            if folder.started:
                folder.write_summary(failed_summary(exc, shown_at(out, folder)))
            raise
        finally:
            if folder.started:
                self.keep_local_log(folder)
            folder.close()

    async def _train(self, *, method: str | Method[Any] | None, plan: BatchPlan | None, run_dir: RunDir | None,
                     on_step: Callable[[LedgerRow], None] | None, artifact: Any, usage: SplitUsage | None,
                     gpus: int | None, interrupt: StopRequest | None, stops: Sequence[StopRule],
                     events: Events | None) -> TrainResult:
        """:meth:`train` into ``run_dir`` (None: no files), which stays open."""
        choice = self.resolve(method if isinstance(method, str) else None)
        built = method if method is not None and not isinstance(method, str) else \
            choice.kind.build_method(choice.method, self.context)
        stored = run_dir.resumed if run_dir is not None else None
        self._record_uses(usage, again=stored is not None)
        events = events if events is not None else Events()
        if on_step is not None:
            events.subscribe(on_kind(StepDone, lambda done: on_step(done.row)))
        plan = plan or await self.batch_plan(run_dir, method=choice.shown)
        if stored is not None and run_dir is not None:
            state = self._resumed_state(stored, choice.kind, built, plan, run_dir)
        else:
            state = TrainState.fresh(artifact if artifact is not None else choice.kind.initial(self.config))
        calls_before, calls = state.calls_record, self.calls

        def calls_now() -> CallsRecord:
            return calls_before.plus(calls.calls, calls.trimmed, calls.failures_total)

        facts = RunFacts()
        events.subscribe(facts)
        record = provenance(seed=self.config.seed, splits=[self.train_split.manifest, self.val_split.manifest])
        training = Training(
            choice.kind, built, plan, self.train_items(), state,
            seed=self.config.seed, rules=self.stop_rules(choice, interrupt=interrupt, extra=stops),
            validate=self._validator(choice), eval_every=self.config.train.eval_every, run_dir=run_dir,
            gpu_clock=self.gpu_clock(gpus), events=events, resumed=stored is not None, calls_now=calls_now,
            budget=self.budget(choice.shown), prices=self.prices(), gauges=self.gauges(),
        )
        if stored is None:
            self._start_run(run_dir, usage)
        if run_dir is not None:
            run_dir.write_provenance(record)
        if self.episodes is not None and run_dir is not None and run_dir.resumed is not None:
            self.episodes.resume_from(run_dir.resumed_trajectories())
        forward = self.events.subscribe(events.emit, critical=True)  # the run's record hears the session
        notice = self.events.subscribe(rerun_notice)
        result: TrainResult | None = None
        failure: BaseException | None = None
        try:
            before, resent_before = await self._server_work(), self.resent
            result = await train(training)
            work = work_since(await self._server_work(), before)
            result = msgspec.structs.replace(result, batching=self.batching, server_work=work,
                                             resent=self.resent - resent_before)
            return result
        except BaseException as exc:
            failure = exc
            raise
        finally:
            self.events.unsubscribe(forward)
            self.events.unsubscribe(notice)
            self._record_calls(run_dir, calls_now())
            if run_dir is not None and run_dir.started:
                await asyncio.to_thread(self._write_page, run_dir, training, choice, facts, record, result, failure)

    @property
    def resent(self) -> int:
        """Requests sent so far once more on a new connection, over every endpoint client, after
        their reused keep-alive connection closed unanswered (:attr:`EndpointClient.resent`)."""
        return sum(client.resent for client in self.clients.every_replica())

    async def _server_work(self) -> dict[str, ServerWork]:
        """Each llama.cpp server's count of its work so far, by its root URL: the local server's
        and those of the endpoints found to be llama.cpp servers that serve their counters
        (:meth:`EndpointClient.server_work`), read at once."""
        clients = {root_url(strip_userinfo(c.config.base_url)): c for c in self.clients.every_replica()}
        readings = await asyncio.gather(*(client.server_work() for client in clients.values()))
        found = {root: work for root, work in zip(clients, readings) if work is not None}
        if self.local is not None and root_url(self.local.url) not in found:
            local = await read_server_work(self.local.url)
            if local is not None:
                found[root_url(self.local.url)] = local
        return found

    def _resumed_state(self, stored: StoredCheckpoint, kind: Kind, method: Method[Any], plan: BatchPlan,
                       run_dir: RunDir) -> TrainState[Any]:
        """The checkpointed state of the run being resumed, typed for ``kind``, ``method`` and
        ``plan``, with its latest ledger rows; :class:`CheckpointError` when it cannot be."""
        if stored.header.seed != self.config.seed:
            raise CheckpointError(f"{stored.path}: made under seed {stored.header.seed}, but the run's configuration "
                                  f"now says seed {self.config.seed}; refusing to resume")
        state = stored.state(kind, method=method.name, plan_state_type=plan.state_type,
                             carried_type=method.carried_type(kind.artifact_type))
        state.ledger.extend(run_dir.read_ledger())
        return state

    def _write_page(self, run_dir: RunDir, training: Training[Any], choice: Choice, facts: RunFacts,
                    record: Provenance, result: TrainResult | None, failure: BaseException | None) -> None:
        """``prompt.txt`` (the best artifact so far, rendered), ``report.md`` and the provenance
        with its end time, however the run ended. A page that cannot be written is said on
        stderr, never raised over the run's own outcome."""
        try:
            state, kind = training.state, choice.kind
            deployable = kind.deployable(state.best if state.best_score is not None else state.artifact)
            run_dir.write_prompt(deployable.render())
            ended = record.ended_now()
            run_dir.write_provenance(ended)
            title = f"combee learn: {kind.name} {choice.shown} on {self.task.name}"
            curve = curve_png(list(facts.curve), title=title)
            page = run_report(
                title=title, outcome=_outcome(result, failure, facts, run_dir), result=result, facts=facts,
                counts=state.counts, record=ended, val_split=self.config.task.val_split, lessons=kind.lessons(state.artifact),
                learned={kind.size_unit: len(state.artifact), **kind.summary(state.artifact)},
                plot=CURVE_FILE if curve is not None else None, served=self.served())
            run_dir.write_report(page, curve)
        except Exception as exc:  # the run's outcome stands; its page is a courtesy
            print(f"combee: could not write {run_dir.root / 'report.md'}: {type(exc).__name__}: {exc}", file=sys.stderr)

    def served(self) -> dict[str, str]:
        """Which model at which endpoint serves each role (``model at URL``, replicas joined;
        credentials never shown)."""
        clients = self.calls.clients
        return {role: ", ".join(f"{replica.config.model} at {strip_userinfo(replica.config.base_url)}"
                                for replica in clients.replicas(role)) for role in clients}

    def _record_uses(self, usage: SplitUsage | None, *, again: bool) -> None:
        """Check every split use (a test split is refused); under a card, append them to its
        record, once per run (``again``: a resumed run, already recorded)."""
        uses = self.split_uses(usage.roles if usage is not None else None)
        if usage is not None and not again:
            append_usage(usage.record, [
                usage_entry(split.manifest, role=role, use=use, run=usage.run, command=usage.command)
                for split, role, use in uses
            ])

    async def evaluate(self, deployable: Any, examples: Sequence[Example], *, learner: str | None = None) -> EvalResult:
        """``deployable`` (what a run's ``final.json``/``best.json`` hold) scored on ``examples``
        by its learner (``learner``, default the configured one), per example."""
        kind = self.choice.kind if learner is None else LEARNERS.load(learner)
        return await kind.evaluate(self.context, deployable, examples)

    def _validator(self, choice: Choice) -> Callable[[Any], Any] | None:
        """Scores an artifact on the validation split (None: the split is empty)."""
        examples = self.val_split.examples
        if not examples:
            return None

        async def validate(artifact: Any) -> EvalResult:
            return await choice.kind.evaluate(self.context, choice.kind.deployable(artifact), examples)

        return validate

    def _record_calls(self, run_dir: RunDir | None, calls: CallsRecord) -> None:
        """Rewrite ``capabilities.json`` at the end (a form may have been left during the run) and
        write ``calls.json`` (``calls``: calls per role over every process of the run; ``trimmed``:
        per role, calls sent again with half the playbook after a context error; failures are in
        ``errors.jsonl``, line by line)."""
        if run_dir is not None:
            run_dir.write_capabilities(self.capabilities())
            run_dir.write_calls(calls.as_file())

    def capabilities(self) -> list[dict[str, object]]:
        """Each distinct endpoint's :class:`~combee_fast.endpoint.capabilities.Capabilities`
        (structured-output form, how it was chosen, context length, slots), with its roles, the
        requests it may have in flight (``in_flight_limit``: now; ``in_flight_ceiling``: the most),
        how often a timeout lowered that limit (``overloads``) and whether replies are streamed."""
        found: dict[int, dict[str, object]] = {}
        roles: dict[int, list[str]] = {}
        for role in self.clients:
            for client in self.clients.replicas(role):
                gate = client.gate
                roles.setdefault(id(client), []).append(role)
                found.setdefault(id(client), {
                    **msgspec.to_builtins(client.capabilities), "roles": roles[id(client)], "in_flight_limit": gate.limit,
                    "in_flight_ceiling": gate.ceiling, "overloads": gate.overloads,
                    "stream": client.config.transport.stream})
        return list(found.values())

    def _start_run(self, run_dir: RunDir | None, usage: SplitUsage | None) -> None:
        """The run has started: write its config, split manifests and card, and move its
        directory into place (replacing any previous run only now)."""
        if run_dir is None:
            return
        run_dir.write_config(self.config)
        run_dir.write_splits([self.train_split.manifest, self.val_split.manifest])
        run_dir.write_capabilities(self.capabilities())
        run_dir.write_sampling(self.calls.effective_sampling())
        if usage is not None:
            run_dir.write_card(usage.card_text)
        run_dir.start()

    def keep_local_log(self, run_dir: RunDir) -> None:
        """Copy the local server's log and command into ``run_dir`` (nothing without one)."""
        if self.local is not None:
            run_dir.keep_server_log(self.local.log_path.read_text(errors="replace"), {
                "kind": self.local.kind, "command": self.local.command, "model": str(self.local.model),
                "started_s": self.local.started_s})

    def roles(self) -> tuple[Role, ...]:
        """Every role the session's calls are made as: its learner's and its task's."""
        return (*self.choice.kind.roles, *task_roles(self.task))

    def prices(self) -> dict[str, Price | None]:
        """Each role's price, from its endpoint's configuration (:func:`~combee_fast.money.dollars.role_prices`)."""
        return role_prices(self.config, self.roles())

    def gauges(self) -> Gauges:
        """Each role's calls in flight on its endpoint, with the map's width and the examples an
        evaluation scores at once (GEPA validates inside its steps) as limits that may cap them."""
        workers, parallel = self.config.map.workers, self.config.eval.parallel
        return Gauges(self.clients, [role.key for role in self.roles() if role.key in self.clients],
                      [(workers, f"map.workers={workers} (--workers)"),
                       (parallel, f"eval.parallel={parallel} (--eval-parallel)")])

    def gpu_clock(self, gpus: int | None = None) -> GpuClock | None:
        """The clock of this session's GPU-seconds (see :meth:`train`); None when unknown."""
        if self.server is not None:
            return GpuClock(gpus or SIMULATED_GPUS, busy_s=self.server.busy_s)
        return GpuClock(gpus) if gpus is not None else None


def _outcome(result: TrainResult | None, failure: BaseException | None, facts: RunFacts, run_dir: RunDir) -> str:
    """How a run ended, in one sentence for its page."""
    if failure is not None:
        code = getattr(failure, "exit_code", None)
        return f"Failed{f' (exit {code})' if code is not None else ''}: {scrub(str(failure)) or type(failure).__name__}"
    assert result is not None
    if result.interrupted:
        return (f"Interrupted after step {result.steps}; resume with "
                f"`combee learn --resume {shlex.quote(str(run_dir.root))}`")
    if result.stopped_by is not None:
        return f"Stopped early after step {result.steps}: {result.stopped_by}"
    reason = facts.stopped.reason if facts.stopped is not None and facts.stopped.reason else "its work was done"
    return f"Done after step {result.steps}: {reason}"


@contextlib.asynccontextmanager
async def open_session(config: SessionConfig, *, check: bool = True, events: Events | None = None,
                       task: Task | None = None) -> AsyncIterator[Session]:
    """Load the task, start the local server or the simulated endpoint if a role needs one, open
    the role clients (:func:`~combee_fast.roles.clients.open_role_clients`).

    An unknown learner or method, a learner's section that does not decode, or an empty train
    split, raises :class:`ConfigError`. With ``check``, every real endpoint is proved to serve its model first
    (:meth:`EndpointClient.check`): an unreachable one raises
    :class:`combee_fast.errors.EndpointUnreachable` before any work starts. Roles that name the
    same URL and model share one client, and so one concurrency cap. A run of agent episodes
    opens its rollout executor too (a sandbox that cannot start here is a :class:`ConfigError`).
    ``events``: the session's hub (:attr:`Session.events`; default: a new one), given to hear
    what opening it says too (its endpoints' probes when slow, waits asked by a server).
    ``task``: the task object itself, in place of the one ``config.task`` names (rows held in
    memory, :func:`combee_fast.optimize.optimize`); a ``combee sim-server`` is then not asked
    whether it plays that task's world.
    """
    choice = resolve(config.learner, config.method)
    config = settled(config, choice.kind)  # every learner's section checked, the run's learner's complete
    named = task is None
    task = get_task(config.task.name, **config.task.options) if task is None else task
    _check_env(config.agent, task)
    train_split = task.load(config.task.train_split)
    val_split = task.load(config.task.val_split)
    if not train_split.examples:  # nothing to learn from (or to evaluate): never a silent "success"
        raise ConfigError(f"task {task.name!r}: split {config.task.train_split!r} is empty")
    scorable = getattr(task, "scorable", None)  # a task some of whose examples cannot score a new answer
    unscored = [e for e in val_split.examples if scorable is not None and not scorable(e)]
    if unscored:
        raise ConfigError(f"task {task.name!r}: validation split {config.task.val_split!r}: {len(unscored)} of "
                          f"{len(val_split.examples)} examples have no ground truth to score a new answer against "
                          f"(e.g. {unscored[0].id}); name a split of examples that have one, or none "
                          "(--val-split 'all[0:0]')")
    cache = None
    if config.cache.path is not None and config.cache.mode != "off":
        cache = ReplayCache(config.cache.path, CacheMode(config.cache.mode))
    async with contextlib.AsyncExitStack() as stack:
        server, local, fallback = await _fallback_server(config, task, choice.kind, stack)
        if cache is not None:
            stack.callback(cache.close)
        role_map = RoleMap.from_config(config, (*choice.kind.roles, *task_roles(task)), fallback,
                                       learner=choice.kind.name)
        events = events if events is not None else Events()  # the session's hub (Session.events)
        clients = await open_role_clients(role_map, stack, cache=cache, check=check, events=events)
        if named:
            _check_worlds(task, clients)
        _check_roles(choice.kind, clients, server)
        calls = RoleCalls.on(role_map, task, clients, events=events)
        episodes = await _open_episodes(config, task, calls, stack)
        yield Session(config, task, train_split, val_split, calls, server, local, episodes)


def _check_worlds(task: Task, clients: RoleClients) -> None:
    """:class:`ConfigError` (one line) when an endpoint is a ``combee sim-server`` that says it
    plays no world of ``task`` (its answers would be for another task's questions)."""
    for client in clients.distinct():
        for replica in getattr(client, "replicas", (client,)):
            worlds = getattr(replica, "sim_worlds", None)
            if worlds is not None and task.name not in worlds:
                raise ConfigError(
                    f"endpoint {replica.config.name!r} is a combee sim-server playing {', '.join(worlds)}, not task "
                    f"{task.name!r}: start it with `combee sim-server --world {task.name}`"
                    + (" --data FILE (and the run's --task-option)" if task.name in ("jsonl", "traces") else ""))


def _check_roles(kind: Any, clients: RoleClients, server: SimServer | None) -> None:
    """:class:`ConfigError` (one line, naming the role and what to do) when a role of learner
    ``kind`` is served by a simulated endpoint (this session's own ``server``, or a ``combee
    sim-server``) that says it does not answer that role: its replies would be placeholders, not
    a model's answers, and the run would score them as if they were."""
    for role in kind.roles:
        for replica in clients.replicas(role.key):
            played = server.roles if server is not None and replica.config.base_url.startswith(server.url) \
                else getattr(replica, "sim_roles", None)
            if played is not None and role.key not in played:
                where = "the in-process simulated endpoint" if server is not None and played is server.roles \
                    else f"endpoint {replica.config.name!r}, a combee sim-server,"
                named = f" (requests named {role.key!r})" if role.key != role.name else ""
                raise ConfigError(
                    f"{where} does not play role {role.name!r}{named} of learner {kind.name!r}: give the learner a "
                    f"responder for it (its kind's `responders`, docs/own-learner.md) and start `combee sim-server "
                    f"--learner {kind.name}`, or serve the role by a real model (--role-endpoint {role.name}=URL)")


def _check_env(agent: AgentConfig, task: Task) -> None:
    """:class:`ConfigError` (one line) for an environment given to a single-call task with no
    agent of the user's own to act in it: the built-in ReAct agent would take each example's one
    model call for an agent's turn (and the simulated endpoint plays no such turn for it)."""
    if agent.env is not None and not isinstance(task, EnvironmentTask) and agent.factory in (None, BUILT_IN_AGENT):
        raise ConfigError(f"--env {agent.env}: task {task.name!r} is single-call (one model call per example, no "
                          f"environment); give your agent with --agent package.module:factory, or use a task with "
                          f"an environment (--task terminal)")


async def _open_episodes(config: SessionConfig, task: Task, calls: RoleCalls,
                         stack: contextlib.AsyncExitStack) -> TrajectoryJournal | None:
    """The rollout executor of a run whose attempts are agent episodes (None: single calls),
    whatever the learner: the agent's turns are made as its serving role."""
    if not uses_agents(config.agent, task):
        return None
    from combee_fast.rollouts.chat import AgentChat
    from combee_fast.rollouts.executors import open_executor

    spec = RolloutSpec(config.agent, config.executor, config.sandbox, config.task, config.map.workers)
    executor = await stack.enter_async_context(open_executor(spec, AgentChat(calls, config.agent.tool_calls),
                                                             task=task))
    return TrajectoryJournal(executor, calls)


async def _fallback_server(config: SessionConfig, task: Task, kind: Kind,
                           stack: contextlib.AsyncExitStack) -> tuple[SimServer | None, Any, Fallback | None]:
    """The server of the roles without a URL of their own: the local server (``config.local``),
    else the simulated endpoint playing ``task``'s world (and answering the roles of the
    learner ``kind`` by its own responders, if it has any), else none (every one of the
    learner's roles has a URL)."""
    if config.local is not None:
        from combee_fast.endpoint.local import LocalServer

        local = LocalServer(config.local)
        print(f"combee: starting the local {local.kind} ({local.model.name}) on {local.url}", file=sys.stderr,
              flush=True)
        await stack.enter_async_context(local)
        transport = msgspec.structs.replace(config.transport, concurrency=min(config.transport.concurrency,
                                                                              config.local.slots),
                                            stream=True)  # a request given up on stops generating
        return None, local, Fallback(local.url, local.url, local.alias, transport, simulated=False)
    if all(config.endpoint_for(*role.lookup_keys).url is not None for role in (*kind.roles, *task_roles(task))):
        return None, None, None
    sim = config.sim
    try:  # the learners' roles by their responders, the run's learner's first (the terminal task: its agent)
        world = task_world(task, run_roles(kind), variant=sim.world)
    except ConfigError:  # already one line naming what and what to do
        raise
    except ValueError as exc:
        raise ConfigError(f"sim.world: {exc}") from None
    server = await stack.enter_async_context(SimServer(
        world, preset=sim.preset, time_scale=sim.time_scale, faults=sim.faults, seed=config.seed,
        latency_jitter=sim.latency_jitter, worlds=(task.name,), roles=world.plays(),
    ))
    return server, None, Fallback(server.url, f"sim:{sim.preset}", server.model, config.transport, simulated=True)
