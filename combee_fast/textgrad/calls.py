"""TextGrad's role calls over the run's endpoints: prompt -> endpoint -> parsed record.

Each role is declared (:data:`ROLES`) with its configuration name, request name and pool; a role
without an endpoint of its own is served by its pool's, so ``--role-endpoint loss=URL`` gives the
loss its own evaluator model:

- **forward** (``forward``, requests ``textgrad_forward``, pool ``serve``): the prompt variable as
  the system message, the question as the user message; the answer is graded by the task. On a
  task solved by acting (``attempts``: agent episodes), the forward pass is one episode: the
  prompt variable is the agent's instructions (its context, with no citable parts), the
  environment's checks grade it, and the graded answer carries the trajectory.
- **loss** (``loss``, ``textgrad_loss``, pool ``evaluate``): an evaluator's verdict and critique
  of one answer, read against the grader's remarks (the task's feedback); of an episode, read from
  its trajectory (rendered by :mod:`combee_fast.roles.trajectory` within the loss endpoint's
  context) and the checks' reward and remarks.
- **gradient** (``gradient``, ``textgrad_gradient``, pool ``propose``): from the prompt, the
  question, the answer (an episode's trajectory) and the critique, what in the prompt led there
  and the one line the prompt should gain. TextGrad chains two backward calls here (loss to
  answer, answer to prompt); one call reading the whole conversation states the prompt's gradient
  directly.
- **step** (``step``, ``textgrad_step``, pool ``propose``): the optimizer's update over a set of
  gradients. It replies with the numbered lines to remove and the lines to add, not with the
  whole rewritten prompt, so its reply stays short however long the prompt grows.
- **reduce** (``reduce``, ``textgrad_reduce``, pool ``propose``): several updates proposed against
  the same prompt merged into one; it keeps changes by reference (``[r.n]``) and writes anew only
  what it must merge.

Seeds come from the run's seed tree by the call's identity: forward, loss and gradient by their
epoch (``"eval"`` for an evaluation) and example, so two methods asking the same question get the
same draw (an episode's seed is its example's node under the same epoch); step and reduce by the
place the method gives them. The gradient is the role a diversity remedy of the batch planner
makes sample hotter. No call raises for a bad endpoint or reply: the failure is recorded on what
it returns, and counted by the run's role calls (``errors.jsonl``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import msgspec
import orjson

from combee_fast.endpoint.calls import ChatResult
from combee_fast.protocols.rollouts import Attempts
from combee_fast.protocols.tasks import Task
from combee_fast.roles.base import convert, decode_json_object, fill, load_prompt
from combee_fast.roles.bounds import (ANSWER_CHARS, CONTENT_CHARS, FIELD_CHARS, MAX_KEEP, MAX_OPS, REASONING_CHARS,
                                     array, text)
from combee_fast.roles.calls import RoleCalls
from combee_fast.roles.spec import Role
from combee_fast.roles.trajectory import fitted_prompt, render_trajectory
from combee_fast.schema import CallError, Example, GradedAnswer, Message, Usage
from combee_fast.textgrad.variable import LineEdit, PromptVariable

FORWARD_ROLE = "textgrad_forward"
LOSS_ROLE = "textgrad_loss"
GRADIENT_ROLE = "textgrad_gradient"
STEP_ROLE = "textgrad_step"
REDUCE_ROLE = "textgrad_reduce"
"""The names TextGrad's requests carry (:attr:`Role.request_name <combee_fast.roles.spec.Role.request_name>`)."""

FORWARD_MAX_TOKENS = 1024
CRITIQUE_MAX_TOKENS = 1024
STEP_MAX_TOKENS = 4096
REDUCE_MAX_TOKENS = 2048

FORWARD = Role("forward", "serve", FORWARD_MAX_TOKENS, request_name=FORWARD_ROLE,
               prompts=("textgrad/prompts/forward_user.txt",))
LOSS = Role("loss", "evaluate", CRITIQUE_MAX_TOKENS, request_name=LOSS_ROLE,
            prompts=("textgrad/prompts/loss.txt", "textgrad/prompts/loss_user.txt",
                     "textgrad/prompts/loss_agent.txt", "textgrad/prompts/loss_agent_user.txt"))
GRADIENT = Role("gradient", "propose", CRITIQUE_MAX_TOKENS, request_name=GRADIENT_ROLE, diverse=True,
                prompts=("textgrad/prompts/gradient.txt", "textgrad/prompts/gradient_user.txt",
                         "textgrad/prompts/gradient_agent.txt", "textgrad/prompts/gradient_agent_user.txt"))
STEP = Role("step", "propose", STEP_MAX_TOKENS, request_name=STEP_ROLE,
            prompts=("textgrad/prompts/step.txt", "textgrad/prompts/step_user.txt"))
REDUCE = Role("reduce", "propose", REDUCE_MAX_TOKENS, request_name=REDUCE_ROLE,
              prompts=("textgrad/prompts/merge.txt", "textgrad/prompts/merge_user.txt"))
ROLES = (FORWARD, LOSS, GRADIENT, STEP, REDUCE)
"""Every TextGrad role, in call order."""
MAX_ADDED = 32
"""Most lines one step may add (a bound of its schema: a batch's gradients may teach many)."""

FORWARD_TEMPLATE = load_prompt("forward_user.txt", beside=__file__)
LOSS_SYSTEM, LOSS_TEMPLATE = load_prompt("loss.txt", beside=__file__), load_prompt("loss_user.txt", beside=__file__)
GRADIENT_SYSTEM, GRADIENT_TEMPLATE = load_prompt("gradient.txt", beside=__file__), load_prompt("gradient_user.txt", beside=__file__)
LOSS_AGENT_SYSTEM = load_prompt("loss_agent.txt", beside=__file__)
LOSS_AGENT_TEMPLATE = load_prompt("loss_agent_user.txt", beside=__file__)
GRADIENT_AGENT_SYSTEM = load_prompt("gradient_agent.txt", beside=__file__)
GRADIENT_AGENT_TEMPLATE = load_prompt("gradient_agent_user.txt", beside=__file__)
STEP_SYSTEM, STEP_TEMPLATE = load_prompt("step.txt", beside=__file__), load_prompt("step_user.txt", beside=__file__)
REDUCE_SYSTEM, REDUCE_TEMPLATE = load_prompt("merge.txt", beside=__file__), load_prompt("merge_user.txt", beside=__file__)


def _object(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _added_line(parts: Sequence[str]) -> dict[str, Any]:
    return _object(part={"type": "string", "enum": list(parts)}, line=text(CONTENT_CHARS))


FORWARD_SCHEMA = _object(reasoning=text(REASONING_CHARS), final_answer=text(ANSWER_CHARS))
LOSS_SCHEMA = _object(verdict={"type": "string", "enum": ["correct", "incorrect"]}, critique=text(FIELD_CHARS))
GRADIENT_SCHEMA = _object(diagnosis=text(FIELD_CHARS), change=text(CONTENT_CHARS))


def step_schema(parts: Sequence[str]) -> dict[str, Any]:
    """The step's reply: line numbers to remove, lines to add to one of ``parts``."""
    return _object(reasoning=text(REASONING_CHARS), remove=array({"type": "integer"}, MAX_OPS),
                   add=array(_added_line(parts), MAX_ADDED))


def reduce_schema(parts: Sequence[str]) -> dict[str, Any]:
    """The reduce's reply: references kept, lines written anew in one of ``parts``."""
    return _object(reasoning=text(REASONING_CHARS), keep=array(text(16), MAX_KEEP),
                   add=array(_added_line(parts), MAX_OPS))


class Loss(msgspec.Struct, frozen=True):
    """The evaluator's judgement of one answer."""

    verdict: str
    critique: str
    usage: Usage
    error: CallError | None = None


class Gradient(msgspec.Struct, frozen=True):
    """The textual gradient of one example: what in the prompt led to its outcome
    (``diagnosis``) and the one line the prompt should gain (``change``). What the step reads."""

    item_id: str
    verdict: str
    diagnosis: str
    change: str
    usage: Usage
    error: CallError | None = None


class Update(msgspec.Struct, frozen=True):
    """A step's or a reduce's proposed edits, the call's usage and its error."""

    edits: tuple[LineEdit, ...]
    usage: Usage
    error: CallError | None = None


class _ForwardReply(msgspec.Struct):
    reasoning: str
    final_answer: str | int | float


class _LossReply(msgspec.Struct):
    verdict: Literal["correct", "incorrect"]
    critique: str


class _GradientReply(msgspec.Struct):
    diagnosis: str
    change: str


class _AddedLine(msgspec.Struct):
    part: str
    line: str


class _StepReply(msgspec.Struct):
    reasoning: str
    remove: list[int]
    add: list[_AddedLine]


class _ReduceReply(msgspec.Struct):
    reasoning: str
    keep: list[str]
    add: list[_AddedLine]


def numbered(variable: PromptVariable) -> str:
    """The variable as the step reads it: ``(n) [part] line`` per non-blank line."""
    return "\n".join(f"({n}) [{part}] {line}" for n, (part, line) in enumerate(variable.lines(), start=1))


def feedback_text(gradients: Sequence[Gradient]) -> str:
    """Gradients as the step reads them: one JSON object per line."""
    return "\n".join(
        orjson.dumps({"verdict": g.verdict, "diagnosis": g.diagnosis, "change": g.change}).decode() for g in gradients
    )


def changes_text(proposals: Sequence[Sequence[LineEdit]]) -> str:
    """Proposals as the reduce reads them: a block per proposal, a reference per change."""
    blocks = []
    for number, edits in enumerate(proposals, start=1):
        lines = [f"[{ref}] {'remove' if edit.remove else f'add to {edit.part}'}: {edit.line}"
                 for ref, edit in _referenced(number, edits)]
        blocks.append("\n".join([f"### Proposal {number}", *lines]))
    return "\n\n".join(blocks)


def _referenced(number: int, edits: Sequence[LineEdit]) -> list[tuple[str, LineEdit]]:
    return [(f"{number}.{n}", edit) for n, edit in enumerate(edits, start=1)]


def forward_messages(question: str, prompt: str) -> tuple[Message, ...]:
    """The forward call: ``prompt`` (the rendered variable) as the system message, ``question``."""
    return Message("system", prompt), Message("user", fill(FORWARD_TEMPLATE, question=question))


def loss_messages(forward: GradedAnswer) -> tuple[Message, ...]:
    """The loss call over ``forward``'s answer and the grader's remarks on it."""
    user = fill(LOSS_TEMPLATE, question=forward.example.input, answer=forward.answer or "(no answer)",
                feedback=forward.feedback or "(none)")
    return Message("system", LOSS_SYSTEM), Message("user", user)


def gradient_messages(prompt: str, forward: GradedAnswer, loss: Loss) -> tuple[Message, ...]:
    """The gradient call: the prompt, the question, the answer, the loss's verdict and critique."""
    user = fill(GRADIENT_TEMPLATE, prompt=prompt, question=forward.example.input,
                answer=forward.answer or "(no answer)", critique=f"{loss.verdict}: {loss.critique}")
    return Message("system", GRADIENT_SYSTEM), Message("user", user)


def loss_agent_messages(forward: GradedAnswer, trajectory: str) -> tuple[Message, ...]:
    """The loss call over an episode's ``trajectory`` (rendered), its checks' reward and remarks."""
    user = fill(LOSS_AGENT_TEMPLATE, question=forward.example.input, trajectory=trajectory,
                reward=f"{forward.score:g}", feedback=forward.feedback or "(none)")
    return Message("system", LOSS_AGENT_SYSTEM), Message("user", user)


def gradient_agent_messages(prompt: str, forward: GradedAnswer, loss: Loss, trajectory: str) -> tuple[Message, ...]:
    """The gradient call of an episode: the prompt, the task, its ``trajectory`` (rendered) and
    reward, the loss's verdict and critique."""
    user = fill(GRADIENT_AGENT_TEMPLATE, prompt=prompt, question=forward.example.input, trajectory=trajectory,
                reward=f"{forward.score:g}", critique=f"{loss.verdict}: {loss.critique}")
    return Message("system", GRADIENT_AGENT_SYSTEM), Message("user", user)


def step_messages(variable: PromptVariable, gradients: Sequence[Gradient]) -> tuple[Message, ...]:
    """The optimizer step over ``gradients`` of ``variable``."""
    return Message("system", STEP_SYSTEM), Message("user", fill(STEP_TEMPLATE, prompt=numbered(variable),
                                                                 feedback=feedback_text(gradients)))


def reduce_messages(prompt: str, proposals: Sequence[Sequence[LineEdit]]) -> tuple[Message, ...]:
    """The reduce call over ``proposals`` made against ``prompt``."""
    return Message("system", REDUCE_SYSTEM), Message("user", fill(REDUCE_TEMPLATE, prompt=prompt,
                                                                   proposals=changes_text(proposals)))


class TextGradCalls:
    """The TextGrad role calls of one run on ``calls`` (the run's generic role calls, which
    sample, seed and account every call; see the module docstring): ``task`` grades answers;
    ``attempts``: forward passes are agent episodes (None: one forward call each)."""

    def __init__(self, task: Task, calls: RoleCalls, attempts: Attempts | None = None) -> None:
        self.task = task
        self.calls = calls
        self.attempts = attempts

    async def forward(self, example: Example, prompt: str, *, epoch: int | str, version: int = 0) -> GradedAnswer:
        """``example`` answered under ``prompt`` (the variable's ``version``), graded (an agent
        episode with ``prompt`` as its context, when forward passes are attempts)."""
        if self.attempts is not None:
            rollout = await self.attempts.attempt(example, prompt, version=version, epoch=epoch)
            return GradedAnswer(example, rollout.answer, rollout.score or 0.0, rollout.feedback, rollout.usage,
                                rollout.error, rollout.trajectory)
        result = await self._send(FORWARD_ROLE, forward_messages(example.input, prompt), FORWARD_SCHEMA, epoch,
                                  example.id)
        reply = self._parsed(FORWARD_ROLE, result, _ForwardReply)
        if isinstance(reply, CallError):
            score = self.task.score(example, None)
            return GradedAnswer(example, None, score.value, score.feedback, result.usage, reply)
        answer = (reply.final_answer if isinstance(reply.final_answer, str) else str(reply.final_answer)).strip()
        score = self.task.score(example, answer)
        return GradedAnswer(example, answer, score.value, score.feedback, result.usage)

    async def loss(self, forward: GradedAnswer, *, epoch: int | str) -> Loss:
        """The evaluator's verdict and critique of ``forward``'s answer."""
        messages = loss_messages(forward) if forward.trajectory is None else \
            self._with_trajectory(LOSS_ROLE, forward, lambda text: loss_agent_messages(forward, text))
        result = await self._send(LOSS_ROLE, messages, LOSS_SCHEMA, epoch, forward.example.id)
        reply = self._parsed(LOSS_ROLE, result, _LossReply)
        if isinstance(reply, CallError):
            return Loss("", "", result.usage, reply)
        return Loss(reply.verdict, reply.critique.strip(), result.usage)

    async def gradient(self, prompt: str, forward: GradedAnswer, loss: Loss, *, epoch: int | str) -> Gradient:
        """What in ``prompt`` led to ``forward``'s outcome, judged by ``loss``."""
        messages = gradient_messages(prompt, forward, loss) if forward.trajectory is None else \
            self._with_trajectory(GRADIENT_ROLE, forward,
                                  lambda text: gradient_agent_messages(prompt, forward, loss, text))
        result = await self._send(GRADIENT_ROLE, messages, GRADIENT_SCHEMA, epoch, forward.example.id)
        reply = self._parsed(GRADIENT_ROLE, result, _GradientReply, check=_states_a_change)
        if isinstance(reply, CallError):
            return Gradient(forward.example.id, loss.verdict, "", "", result.usage, reply)
        return Gradient(forward.example.id, loss.verdict, reply.diagnosis.strip(), " ".join(reply.change.split()),
                        result.usage)

    async def step(self, variable: PromptVariable, gradients: Sequence[Gradient], *,
                   seed_path: tuple[int | str, ...]) -> Update:
        """One optimizer update of ``variable`` over ``gradients``."""
        names = variable.names()
        result = await self._send(STEP_ROLE, step_messages(variable, gradients), step_schema(names), *seed_path)
        reply = self._parsed(STEP_ROLE, result, _StepReply)
        if isinstance(reply, CallError):
            return Update((), result.usage, reply)
        lines = variable.lines()
        removed = [LineEdit(lines[n - 1][0], lines[n - 1][1], remove=True) for n in dict.fromkeys(reply.remove)
                   if 1 <= n <= len(lines)]
        return Update((*removed, *_added(reply.add, names)), result.usage)

    async def reduce(self, prompt: str, names: Sequence[str], proposals: Sequence[Sequence[LineEdit]], *,
                     seed_path: tuple[int | str, ...]) -> Update:
        """One merge of ``proposals`` (made against ``prompt``, whose parts are ``names``)."""
        result = await self._send(REDUCE_ROLE, reduce_messages(prompt, proposals), reduce_schema(names), *seed_path)
        reply = self._parsed(REDUCE_ROLE, result, _ReduceReply)
        if isinstance(reply, CallError):
            return Update((), result.usage, reply)
        by_ref = {ref: edit for number, edits in enumerate(proposals, start=1)
                  for ref, edit in _referenced(number, edits)}
        kept = [by_ref[ref.strip().strip("[]")] for ref in reply.keep if ref.strip().strip("[]") in by_ref]
        return Update(tuple(dict.fromkeys((*kept, *_added(reply.add, names)))), result.usage)

    def _with_trajectory(self, role: str, forward: GradedAnswer,
                         build: Callable[[str], tuple[Message, ...]]) -> tuple[Message, ...]:
        """``build(trajectory)``: the messages of ``role`` with ``forward``'s trajectory rendered to fit
        the role's endpoint (:mod:`combee_fast.roles.trajectory`)."""
        trajectory = forward.trajectory
        assert trajectory is not None
        return fitted_prompt(lambda chars: build(render_trajectory(trajectory, chars)),
                             self.calls.client(role).capabilities.context_length, self.calls.max_tokens_of(role))

    async def _send(self, role: str, messages: tuple[Message, ...], schema: dict[str, Any],
                    *seed_path: int | str) -> ChatResult:
        return await self.calls.send(self.calls.request(role, messages, *seed_path, schema=schema, schema_name=role))

    def _parsed(self, role: str, result: ChatResult, shape: type[Any],
                check: Callable[[Any, str | None], CallError | None] | None = None) -> Any:
        """The call's error, or its reply validated into ``shape`` (and by ``check``, which may
        find it unusable); the call is noted either way."""
        reply: Any = result.error
        if reply is None:
            obj = decode_json_object(result.data, result.text)
            reply = obj if isinstance(obj, CallError) else convert(obj, shape, result.text, what=role)
        if check is not None and not isinstance(reply, CallError):
            reply = check(reply, result.text) or reply
        self._note(role, reply if isinstance(reply, CallError) else None, result.text)
        return reply

    def _note(self, role: str, error: CallError | None, raw: str | None) -> None:
        self.calls.note(role, error, raw)


def _states_a_change(reply: _GradientReply, raw: str | None) -> CallError | None:
    """A gradient whose change is blank teaches nothing: unusable."""
    return None if reply.change.strip() else CallError("schema_mismatch", f"{GRADIENT_ROLE}: empty change", raw=raw)


def _added(lines: Sequence[_AddedLine], names: Sequence[str]) -> list[LineEdit]:
    """The added lines as edits, whitespace collapsed; a line naming an unknown part goes to the
    only part when there is one (else it stays as named, and the apply turns it down)."""
    only = names[0] if len(names) == 1 else None
    edits = []
    for added in lines:
        line = " ".join(added.line.split())
        if line:
            edits.append(LineEdit(added.part if added.part in names or only is None else only, line))
    return edits
