"""An agent's trajectory as a learner's roles read it (ACE's reflector, GEPA's proposer, TextGrad's
loss and gradient), within a character budget: the one renderer of trajectories.

Policy (:func:`render_trajectory`): every step is a block (its thought, its action, what the
environment answered, what went wrong), then the final answer and the episode's error. When the
blocks do not fit the budget:

1. observations and thoughts are cut to :data:`DETAIL_CHARS` characters each (start and end
   kept, the middle replaced by a count of the characters left out);
2. then the steps that are kept whole are the first one, every step that went wrong (a failed
   or unusable model reply, an environment error) and the last :data:`LAST_STEPS`; the others
   are elided, each run of them replaced by one line saying how many steps were left out;
3. then every kept block is cut further, evenly, until the whole fits.

The budget comes from the reading role's endpoint's context (:func:`trajectory_budget`): what its
context length leaves after the rest of the prompt and the reply, estimated at
:data:`~combee_fast.roles.budget.CONSERVATIVE_CHARS_PER_TOKEN` characters a token, and never
more than :data:`TRAJECTORY_CHARS`; a prompt that holds several trajectories (GEPA's reflective
dataset) shares it evenly among them. :func:`fitted_prompt` builds a prompt with the largest share
whose whole prompt fits, measured as built (a trajectory quoted in JSON takes more room than its
text).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from combee_fast.roles.budget import CONSERVATIVE_CHARS_PER_TOKEN, TEMPLATE_TOKENS_PER_MESSAGE, conservative_tokens
from combee_fast.schema import Message, Step, Trajectory

TRAJECTORY_CHARS = 12_000
"""Most characters of a rendered trajectory in any prompt."""

DETAIL_CHARS = 600
"""Most characters of one observation or thought once a trajectory has to be shortened."""

LAST_STEPS = 3
"""Final steps always kept whole."""

_MIN_DETAIL = 40


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its start and end, the middle counted."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = max(0, (limit - 30) * 2 // 3)
    tail = max(0, limit - 30 - head)
    return f"{text[:head]} [... {len(text) - head - tail} characters left out ...] {text[len(text) - tail:]}"


def _went_wrong(step: Step) -> bool:
    return step.error is not None or step.env_error is not None


def _block(step: Step, detail: int) -> str:
    lines = [f"Step {step.index + 1}:"]
    if step.thought.strip():
        lines.append(f"  thought: {_cut(step.thought, detail)}")
    if step.error is not None:
        lines.append(f"  model reply unusable ({step.error.kind}): {_cut(step.error.message, detail)}")
        if step.raw:
            lines.append(f"  raw reply: {_cut(step.raw, detail)}")
    if step.action is not None:
        lines.append(f"  action: {step.action.name} {_cut(step.action.arguments, detail)}")
        if step.observation or step.env_seconds:
            lines.append(f"  observation: {_cut(step.observation, detail)}")
    if step.env_error is not None:
        lines.append(f"  environment: {step.env_error}")
    return "\n".join(lines)


def _ending(trajectory: Trajectory) -> str:
    lines = [f"Final answer: {trajectory.answer if trajectory.answer is not None else '(none)'}"]
    if not trajectory.finished:
        lines.append("The agent did not finish the episode itself (it ran out of steps or was stopped).")
    if trajectory.error is not None:
        lines.append(f"Episode failed ({trajectory.error.kind}): {trajectory.error.message}")
    return "\n".join(lines)


def _kept(steps: Sequence[Step]) -> list[bool]:
    last = len(steps) - LAST_STEPS
    return [i == 0 or i >= last or _went_wrong(step) for i, step in enumerate(steps)]


def _assemble(steps: Sequence[Step], keep: list[bool], detail: int, ending: str) -> str:
    parts: list[str] = []
    elided = 0
    for step, kept in zip(steps, keep):
        if not kept:
            elided += 1
            continue
        if elided:
            parts.append(f"[... {elided} step{'s' * (elided != 1)} elided ...]")
            elided = 0
        parts.append(_block(step, detail))
    if elided:
        parts.append(f"[... {elided} step{'s' * (elided != 1)} elided ...]")
    return "\n".join([*parts, ending]) if parts else ending


def render_trajectory(trajectory: Trajectory, max_chars: int = TRAJECTORY_CHARS) -> str:
    """``trajectory`` as text of at most ``max_chars`` characters (module docstring's policy)."""
    steps, ending = trajectory.steps, _ending(trajectory)
    every = [True] * len(steps)
    text = _assemble(steps, every, 10 * TRAJECTORY_CHARS, ending)
    if len(text) <= max_chars:
        return text
    detail = DETAIL_CHARS
    text = _assemble(steps, every, detail, ending)
    if len(text) <= max_chars:
        return text
    keep = _kept(steps)
    while True:
        text = _assemble(steps, keep, detail, ending)
        if len(text) <= max_chars or detail == _MIN_DETAIL:
            break
        detail = max(_MIN_DETAIL, detail * 2 // 3)
    return text if len(text) <= max_chars else _cut(text, max_chars)


def trajectory_budget(others: Sequence[Message], context_length: int | None, reply_tokens: int, *,
                      count: int = 1) -> int:
    """The characters each of ``count`` trajectories may take in a prompt whose other messages are
    ``others`` (built with empty trajectories), on an endpoint of ``context_length`` tokens (None:
    unknown) answering in at most ``reply_tokens``: what the context leaves, never more than
    :data:`TRAJECTORY_CHARS` in all, shared evenly."""
    if context_length is None:
        return TRAJECTORY_CHARS // max(1, count)
    left = context_length - reply_tokens - sum(conservative_tokens(m.content) + TEMPLATE_TOKENS_PER_MESSAGE
                                                for m in others)
    return max(0, min(TRAJECTORY_CHARS, left * CONSERVATIVE_CHARS_PER_TOKEN)) // max(1, count)


def _tokens(messages: Sequence[Message]) -> int:
    return sum(conservative_tokens(m.content) + TEMPLATE_TOKENS_PER_MESSAGE for m in messages)


def fitted_prompt(build: Callable[[int], tuple[Message, ...]], context_length: int | None, reply_tokens: int, *,
                  count: int = 1) -> tuple[Message, ...]:
    """``build(chars)``, the messages of a prompt whose ``count`` trajectories are each rendered
    within ``chars``, with the largest ``chars`` (at most :func:`trajectory_budget`'s) for which
    the whole prompt fits an endpoint of ``context_length`` tokens answering in ``reply_tokens``
    (unknown length: that budget as it is)."""
    chars = trajectory_budget(build(0), context_length, reply_tokens, count=count)
    messages = build(chars)
    if context_length is None:
        return messages
    room = context_length - reply_tokens
    while chars > 0 and (over := _tokens(messages) - room) > 0:
        chars = max(0, chars - -(-over * CONSERVATIVE_CHARS_PER_TOKEN // max(1, count)))
        messages = build(chars)
    return messages
