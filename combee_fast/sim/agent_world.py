"""What every world in which the simulated endpoint plays the agent shares (the terminal task's,
the tau2 tasks'): a model, not evidence about real LLMs.

- The agent such a world plays in every serving role, whichever learner's it is, is a
  :class:`~combee_fast.sim.world.WorldAgent`, with the world's
  :class:`~combee_fast.sim.world.EpisodeWords`.
- How the built-in ReAct agent's turn reads its conversation: the learned context in its system
  message (:func:`context_of`, :func:`context_lines`: the ``<learned_context>`` block of a context
  with citable entries, ACE's playbook, or the ``<instructions>`` of a learner whose context has
  no citable parts), the lessons of it that are about a unit (:func:`states_lesson_of`) or
  generic (:func:`is_generic`), as a model finds them, by their text; and the actions its
  earlier turns took (:func:`actions`).
- How it decides, once per episode, whether it knows the way (:func:`knows_the_way`: with
  ``known_accuracy`` when a line of the context states a lesson about the unit, or the retry's
  reflection names it; else with the base accuracy plus the generic lessons' small gain), and
  how it replies: a tool call, or a JSON action when the request offers no tools
  (:func:`action_reply`), and finishes citing the entries it used when they are citable
  (:func:`finish_reply`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import orjson

from combee_fast.rollouts.episode import CITED_ARGUMENT
from combee_fast.schema import Message, ToolCall
from combee_fast.sim.responders import SimReply, SimRequest
from combee_fast.sim.world import Lessons, lesson_unit, playbook_bullets, tagged, uniform

if TYPE_CHECKING:
    from combee_fast.sim.world import TaskWorld

ContextLine = tuple[str | None, str]
"""A line of the learned context: ``(id, text)``, ``id`` a citable entry's (None: a plain line)."""


def context_of(request: SimRequest) -> str | None:
    """The system message of an agent's turn (one holding a learned context block); None otherwise."""
    return next((m.content for m in request.messages if m.role == "system"
                 and ("<learned_context>" in m.content or "<instructions>" in m.content)), None)


def context_lines(system: str) -> tuple[list[ContextLine], bool]:
    """Each line of the learned context in an agent's system prompt, and whether its parts are
    citable (the ``<learned_context>`` block, ACE's playbook; else the ``<instructions>`` block,
    its ``- `` bullets stripped)."""
    entries = tagged(system, "learned_context")
    block, citable = (entries, True) if entries is not None else (tagged(system, "instructions") or "", False)
    lines: list[ContextLine] = []
    for line in block.splitlines():
        entry = playbook_bullets(line)
        if entry:
            lines.append(entry[0])
        elif line.strip():
            lines.append((None, line.strip().removeprefix("- ").removeprefix("* ").strip()))
    return lines, citable


def states_lesson_of(text: str, unit: str, lessons: Lessons) -> bool:
    """Whether a line of the context states a lesson about ``unit``: it names the unit, or it says
    what one of the unit's facets says."""
    return lesson_unit(text) == unit or any(facet in text for facet in lessons.facets(unit))


def is_generic(text: str, lessons: Lessons) -> bool:
    """Whether a line of the context states a generic lesson (by its name or its text)."""
    return lesson_unit(text) == "General" or any(lesson in text for lesson in lessons.generic)


def actions(messages: Sequence[Message]) -> list[tuple[str, dict[str, Any]]]:
    """The actions the agent's earlier turns took, in order: ``(tool, arguments)`` of each tool
    call or JSON action (arguments that are no JSON object read as none)."""
    found: list[tuple[str, dict[str, Any]]] = []
    for message in messages:
        if message.role != "assistant":
            continue
        calls = [(c.name, c.arguments) for c in message.tool_calls]
        if not calls:
            try:
                reply = orjson.loads(message.content)
            except orjson.JSONDecodeError:
                continue
            if isinstance(reply, dict):
                calls = [(str(reply.get("tool")), orjson.dumps(reply.get("arguments", {})).decode())]
        for name, arguments in calls:
            try:
                decoded = orjson.loads(arguments)
            except orjson.JSONDecodeError:
                decoded = {}
            found.append((name, decoded if isinstance(decoded, dict) else {}))
    return found


def knows_the_way(world: TaskWorld, unit: str, about: Sequence[ContextLine], lines: Sequence[ContextLine],
                  reflection: str, seed: int, key: str) -> bool:
    """The episode's one decision (module docstring), drawn by ``seed`` and ``key`` (what the
    episode works on): ``about`` are the context's lines about ``unit``, ``lines`` all of them."""
    known = bool(about) or f"{unit} — " in reflection
    base = world.base_accuracy(sum(1 for _, text in lines if is_generic(text, world.lessons)))
    return uniform("act", seed, key) < (world.params.known_accuracy if known else base)


def action_reply(request: SimRequest, tool: str, arguments: dict[str, Any], thought: str) -> str | SimReply:
    """A call of ``tool``: a tool call when the request offers tools, else a JSON action."""
    if request.tools:
        return SimReply(thought, (ToolCall(tool, msgspec.json.encode(arguments).decode()),))
    return orjson.dumps({"thought": thought, "tool": tool, "arguments": arguments}).decode()


def finish_reply(request: SimRequest, about: Sequence[ContextLine], lines: Sequence[ContextLine], citable: bool,
                 lessons: Lessons, thought: str) -> str | SimReply:
    """The finishing call; when the context is citable it cites the first two entries about the
    unit (``about``) and the first two generic ones, in the agent's finish argument
    (:data:`~combee_fast.rollouts.episode.CITED_ARGUMENT`)."""
    finish: dict[str, object] = {"answer": "done"}
    if citable:
        generic = [bid for bid, text in lines if bid is not None and is_generic(text, lessons)][:2]
        finish[CITED_ARGUMENT] = [bid for bid, _ in about if bid is not None][:2] + generic
    return action_reply(request, "finish", finish, thought)
