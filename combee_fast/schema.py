"""The data that crosses a boundary: between stages, to and from endpoints, to disk.

All types are msgspec Structs, and none is a learner's own (ACE's reflections, operations and
bullets are in :mod:`combee_fast.ace.records`). Values shared between tasks (examples, rollouts,
trajectories, usage records) are frozen so a reader can never see one change under it. Anything
persisted carries ``schema_version``; see :data:`SCHEMA_VERSION`.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

import msgspec

SCHEMA_VERSION = 2
"""Version of every persisted record. 1: playbooks without per-bullet provenance."""


class ToolCall(msgspec.Struct, frozen=True, omit_defaults=True):
    """One tool call an assistant message asks for (OpenAI tool calling), or an agent's action:
    the tool's ``name`` and its ``arguments`` as the JSON text the model wrote."""

    name: str
    arguments: str = "{}"
    id: str = ""


class Message(msgspec.Struct, frozen=True, omit_defaults=True):
    """One chat message as sent to an OpenAI-compatible endpoint. ``tool_calls`` (an assistant
    turn that called tools) and ``tool_call_id`` (a ``tool`` message answering one) are left out
    of the encoding when unset, so plain messages encode as ``{"role", "content"}``."""

    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


class Usage(msgspec.Struct, frozen=True):
    """Accounting for one LLM call (after retries), tagged with who made it and where.

    ``latency_s`` is wall-clock seconds measured by the client. ``sim_latency_s`` is the latency
    the simulated server reports in its own (simulated) seconds; ``None`` for real endpoints.
    ``retry_kinds`` holds the :attr:`CallError.label` of each failed attempt that was retried
    (``len(retry_kinds) == retries``). ``cached_prompt_tokens``: of ``prompt_tokens``, those the
    server's prompt cache spared it reading, where it says (0 where it does not).
    """

    role: str = ""
    model: str = ""
    endpoint: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    sim_latency_s: float | None = None
    retries: int = 0
    cached: bool = False
    retry_kinds: tuple[str, ...] = ()
    cached_prompt_tokens: int = 0

    @property
    def effective_latency_s(self) -> float:
        """Simulated seconds when the endpoint reports them, wall seconds otherwise."""
        return self.latency_s if self.sim_latency_s is None else self.sim_latency_s


ErrorKind = Literal[
    "timeout",
    "connection",
    "http_status",
    "malformed_json",
    "truncated",
    "too_large",
    "schema_mismatch",
    "replay_miss",
    "cancelled",
    "placeholder",
    "no_answer",
]


class CallError(msgspec.Struct, frozen=True):
    """A failed LLM call or an unusable response, recorded on the record it belongs to."""

    kind: ErrorKind
    message: str
    status: int | None = None
    raw: str | None = None  # the offending response text, kept so nothing is lost

    @property
    def label(self) -> str:
        """The failure kind as counted in ledgers and summaries: ``429``, ``5xx``, ``http_<status>``
        for other HTTP statuses, ``malformed`` for unparseable JSON, else :attr:`kind`."""
        if self.kind == "http_status":
            if self.status == 429:
                return "429"
            if self.status is not None and 500 <= self.status <= 599:
                return "5xx"
            return f"http_{self.status}"
        if self.kind == "malformed_json":
            return "malformed"
        return self.kind


class Example(msgspec.Struct, frozen=True):
    """One task instance. ``index`` is its position in its split and its identity in a run."""

    index: int
    input: str
    target: str | None = None
    split: str = ""
    meta: dict[str, str] = msgspec.field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.split}:{self.index}"


class GradedAnswer(msgspec.Struct, frozen=True):
    """A prompt's answer to one example, graded: its score and the grader's feedback (GEPA's
    metric call, TextGrad's forward pass; a :class:`~combee_fast.protocols.Trace` of one
    attempt). ``answer`` is None when the call failed (``error``) or gave no answer. An attempt
    made by an agent episode carries its ``trajectory`` (the environment's checks graded it;
    ``usage`` sums its model calls, ``error`` is the call error that left it unanswered)."""

    example: Example
    answer: str | None
    score: float
    feedback: str
    usage: Usage
    error: CallError | None = None
    trajectory: Trajectory | None = None

    @property
    def item_id(self) -> str:
        return self.example.id

    @property
    def sim_seconds(self) -> float:
        """The attempt's duration: its model seconds, and an episode's environment seconds."""
        return self.usage.effective_latency_s + self.env_seconds

    @property
    def env_seconds(self) -> float:
        """Seconds its episode spent in its environment (0 for a single call)."""
        return self.trajectory.env_seconds if self.trajectory is not None else 0.0

    @property
    def reward(self) -> float:
        return self.score

    def call_outcomes(self) -> list[tuple[Usage, CallError | None]]:
        """Its call's ``(usage, error)``; an episode's: each of its model calls'."""
        return self.trajectory.call_outcomes() if self.trajectory is not None else [(self.usage, self.error)]

    def episodes(self) -> list[Trajectory]:
        """Its agent episode, if it was one."""
        return [self.trajectory] if self.trajectory is not None else []

    def errors(self) -> list[tuple[str, CallError]]:
        return [] if self.error is None else [(self.example.id, self.error)]


class Tool(msgspec.Struct, frozen=True):
    """A tool an environment offers an agent: its name, what it does, and the JSON Schema of its
    arguments (an object)."""

    name: str
    description: str
    parameters: dict[str, Any]


class Observation(msgspec.Struct, frozen=True):
    """What an environment answered one action: its text, the wall it hit (``error``: a sandbox
    limit, an unknown tool...; None: none), and the environment's own seconds when it keeps its
    own clock (None: the step's wall time is measured); ``calls``: the usage of the model calls
    the environment made for it (a task's user simulator: role ``user``), accounted with the
    episode's."""

    text: str
    error: str | None = None
    seconds: float | None = None
    calls: tuple[Usage, ...] = ()


class Step(msgspec.Struct, frozen=True):
    """One step of an agent episode: a model turn (``thought``: its text; ``usage``: the call,
    role ``""`` when the step made none), the ``action`` it chose (None: it finished, or its reply
    was unusable), what the environment answered (``observation``, bounded), the seconds spent in
    the model and in the environment, and what went wrong: ``error`` for the model call or an
    unusable reply (``raw``: the reply as received), ``env_error`` for the environment (a
    sandbox limit that fired, a step past its time limit...)."""

    index: int
    thought: str
    action: ToolCall | None
    observation: str
    model_seconds: float
    env_seconds: float
    usage: Usage
    error: CallError | None = None
    env_error: str | None = None
    raw: str | None = None


class EpisodeError(msgspec.Struct, frozen=True):
    """Why an episode failed: its ``kind`` (``model_call``, ``unparsed``, ``episode_timeout``, a
    sandbox limit such as ``process_limit``...), a message, and the step it happened at."""

    kind: str
    message: str
    step: int | None = None


class Trajectory(msgspec.Struct, frozen=True):
    """What one agent episode did: its steps in order, its final answer, the reward in [0, 1]
    and the checker's feedback, the error it failed with (None: it did not), and the context
    version (``version``, and ``context_sha`` of its text) that produced it. ``key`` identifies
    the episode within a run (epoch, item, round, version); ``cited`` the ids of the context's
    parts the agent said it used (a learner whose context has citable parts: ACE's bullets);
    ``finished``: the agent ended the episode itself (not a step limit)."""

    key: str
    item_id: str
    round: int
    version: int
    context_sha: str
    seed: int
    steps: tuple[Step, ...]
    answer: str | None
    reward: float
    feedback: str
    error: EpisodeError | None = None
    cited: tuple[str, ...] = ()
    finished: bool = False
    call_error: CallError | None = None  # the model call that ended the episode, when one did
    env_calls: tuple[Usage, ...] = ()  # the environment's own model calls (a task's user simulator)

    @property
    def model_seconds(self) -> float:
        return sum(step.model_seconds for step in self.steps)

    @property
    def env_seconds(self) -> float:
        return sum(step.env_seconds for step in self.steps)

    def call_outcomes(self) -> list[tuple[Usage, CallError | None]]:
        """``(usage, error)`` of every model call of the episode: the agent's in order, then the
        environment's (:attr:`env_calls`)."""
        return [(step.usage, step.error) for step in self.steps if step.usage.role] \
            + [(usage, None) for usage in self.env_calls]


class Rollout(msgspec.Struct, frozen=True):
    """One generator attempt on one example, scored.

    ``round`` counts regenerations after reflection (0 = first attempt). ``cited``: the ids of
    the learned context's parts the answer says it used (a context with citable parts, ACE's
    bullets; empty otherwise). ``error`` is set when the call failed or its output could not be
    parsed; ``answer`` is then ``None``. An attempt made by an agent episode carries its
    ``trajectory`` (its ``usage`` then sums the episode's model calls, and ``error`` is the call
    error that left it unanswered, if any). ``version``:
    the context version the rollout was produced with (an online learner's
    ``context_for(key).version``), so its reward is attributed to that version; ``None`` when
    unknown (offline runs, where the step's snapshot is the version). ``trace``: the W3C
    ``traceparent`` of the host's span it was submitted under, when tracing
    (:func:`combee_fast.tracing.stamp`), so the learner's step joins that trace.
    """

    example: Example
    round: int
    messages: tuple[Message, ...]
    answer: str | None
    reasoning: str
    cited: tuple[str, ...]
    score: float | None
    feedback: str
    usage: Usage
    error: CallError | None = None
    raw: str | None = None
    trajectory: Trajectory | None = None
    version: int | None = None
    trace: str | None = None

    @property
    def id(self) -> str:
        return f"{self.example.id}#r{self.round}"

    @property
    def correct(self) -> bool:
        return self.score is not None and self.score >= 1.0


E = TypeVar("E")
"""The edit type of a learner (ACE: a playbook operation, :class:`~combee_fast.ace.records.Op`;
GEPA: a component rewrite)."""


class Proposal(msgspec.Struct, Generic[E], frozen=True):
    """Edits proposed by one proposer or merger call (ACE: curator or reducer, playbook ops), or
    the error that call ended in. ``source`` names the call, e.g. ``curator[3]`` or ``reducer[0.1]``."""

    source: str
    edits: tuple[E, ...]
    usage: Usage
    error: CallError | None = None
