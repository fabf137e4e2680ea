"""The built-in ReAct agent: think, act with one tool, read the result, until it calls ``finish``.

Its prompts are in ``rollouts/prompts/react_*.txt``; the learned context is in its system prompt
(the ``$context`` slot of both): a context with citable parts (ACE's playbook) between
``<learned_context>`` tags, each entry citable when the agent finishes (``react_system.txt``,
whose ``finish`` takes the ids as :data:`~combee_fast.rollouts.episode.CITED_ARGUMENT`); any other
(GEPA's candidate, TextGrad's prompt variable) as its instructions, between ``<instructions>``
tags (``react_system_plain.txt``). On a retry round the learner's feedback on the last attempt is
in the task message. It asks for actions in one of two forms, chosen per
endpoint (``agent.tool_calls``; ``auto``: the endpoint was probed for tool calling like
structured output is):

- **tool calls**: the environment's tools and ``finish`` offered as OpenAI function tools; the
  reply's first tool call is the action;
- **a bounded JSON action**: ``{"thought", "tool", "arguments"}`` under a JSON Schema whose
  ``tool`` is one of the tools' names and whose ``arguments`` hold only the tools' own argument
  fields, every string with a ``maxLength`` (a constraining grammar cannot loop).

A reply that gives no usable action is kept as an unusable step (its raw text with it) and the
model is told why; :data:`MAX_UNUSABLE` in a row end the episode as ``unparsed``. A model call
that failed ends it (the engine marks it ``model_call``). The conversation is kept within the
endpoint's context when it reported one: the context is cut (whole lines) to what the first
prompt leaves, then the oldest observations are shortened and the oldest turns dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from combee_fast.config import AgentConfig
from combee_fast.protocols.rollouts import AgentEpisode
from combee_fast.roles import bounds
from combee_fast.roles.base import clean_id, decode_json_object, fill, load_prompt
from combee_fast.roles.budget import TEMPLATE_TOKENS_PER_MESSAGE, conservative_tokens, cut_context
from combee_fast.schema import CallError, Message, Tool, ToolCall
from combee_fast.endpoint.calls import ChatResult
from combee_fast.rollouts.episode import CITED_ARGUMENT, FINISH_ACTION, UNANSWERED_KINDS

SYSTEM = load_prompt("react_system.txt", beside=__file__)
SYSTEM_PLAIN = load_prompt("react_system_plain.txt", beside=__file__)
TOOLS_FORMAT = load_prompt("react_tools.txt", beside=__file__)
JSON_FORMAT = load_prompt("react_json.txt", beside=__file__)
TASK = load_prompt("react_task.txt", beside=__file__)
RETRY = load_prompt("react_retry.txt", beside=__file__)
OBSERVATION = load_prompt("react_observation.txt", beside=__file__)
UNUSABLE = load_prompt("react_unusable.txt", beside=__file__)

MAX_UNUSABLE = 2
"""Unusable replies in a row that end an episode."""

THOUGHT_CHARS = 400
ARGUMENT_CHARS = 400
MAX_CITED = 8
"""Bounds of the JSON action: a constraining grammar grows with every character and item a
string or an array may take (llama.cpp refuses grammars much larger than these make)."""
OLD_OBSERVATION_CHARS = 200

FINISH = Tool(
    FINISH_ACTION,
    "End the episode once the task is done: a short final answer, and the ids of the context entries you used.",
    {"type": "object", "properties": {"answer": bounds.text(bounds.ANSWER_CHARS),
                                      CITED_ARGUMENT: bounds.array(bounds.text(bounds.ID_CHARS), MAX_CITED)},
     "required": ["answer"], "additionalProperties": False},
)
"""The agent's own tool: it ends the episode (a context with citable parts: citing them)."""

FINISH_PLAIN = Tool(
    FINISH_ACTION,
    "End the episode once the task is done, with a short final answer.",
    {"type": "object", "properties": {"answer": bounds.text(bounds.ANSWER_CHARS)},
     "required": ["answer"], "additionalProperties": False},
)
"""The finish tool when the context has no citable parts."""

SYSTEM_META = "system"
"""``Example.meta`` key of text a task puts first in the agent's system prompt (a tau2 domain's policy)."""

EMPTY_CITABLE = "(no entries yet)"
"""Stands in for an empty context with citable parts (``react_system.txt``)."""

NO_INSTRUCTIONS = "(no instructions yet)"
"""Stands in for an empty context without citable parts."""


def _bounded(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with a ``maxLength`` on every string it declares (kept when it has one)."""
    if schema.get("type") == "string":
        return {**schema, "maxLength": min(schema.get("maxLength", ARGUMENT_CHARS), ARGUMENT_CHARS)}
    if schema.get("type") == "array":
        return {**schema, "items": _bounded(schema.get("items", {"type": "string"})),
                "maxItems": min(schema.get("maxItems", MAX_CITED), MAX_CITED)}
    if "properties" in schema:
        return {**schema, "properties": {k: _bounded(v) for k, v in schema["properties"].items()}}
    return schema


def action_schema(tools: Sequence[Tool]) -> dict[str, Any]:
    """The bounded JSON action schema over ``tools`` (module docstring)."""
    fields: dict[str, Any] = {}
    for tool in tools:
        fields.update(_bounded(tool.parameters).get("properties", {}))
    return {
        "type": "object",
        "properties": {
            "thought": bounds.text(THOUGHT_CHARS),
            "tool": {"type": "string", "enum": [tool.name for tool in tools]},
            "arguments": {"type": "object", "properties": fields, "additionalProperties": False},
        },
        "required": ["thought", "tool", "arguments"],
        "additionalProperties": False,
    }


def tool_definitions(tools: Sequence[Tool]) -> tuple[dict[str, Any], ...]:
    """``tools`` as OpenAI function tools."""
    return tuple({"type": "function", "function": {"name": t.name, "description": t.description,
                                                   "parameters": _bounded(t.parameters)}} for t in tools)


def _tool_list(tools: Sequence[Tool]) -> str:
    lines = []
    for tool in tools:
        fields = ", ".join(f'"{name}": <{spec.get("type", "value")}>'
                           for name, spec in tool.parameters.get("properties", {}).items())
        lines.append(f"- {tool.name}: {tool.description} Arguments: {{{fields}}}")
    return "\n".join(lines)


def _action_of_json(obj: dict[str, Any], names: set[str], text: str | None) -> tuple[str, ToolCall] | CallError:
    tool, arguments = obj.get("tool"), obj.get("arguments", {})
    if not isinstance(tool, str) or tool not in names:
        return CallError("schema_mismatch", f"'tool' must be one of {sorted(names)}, got {tool!r}", raw=text)
    if not isinstance(arguments, dict):
        return CallError("schema_mismatch", "'arguments' must be an object", raw=text)
    thought = obj.get("thought")
    return (thought if isinstance(thought, str) else ""), ToolCall(tool, msgspec.json.encode(arguments).decode())


def parse_action(result: ChatResult, names: set[str], *, tool_calls: bool) -> tuple[str, ToolCall] | CallError:
    """``(thought, action)`` of a reply, or why it gives none."""
    if tool_calls and result.tool_calls:
        call = result.tool_calls[0]
        if call.name not in names:
            return CallError("schema_mismatch", f"unknown tool {call.name!r}; the tools are {sorted(names)}",
                             raw=msgspec.json.encode(result.tool_calls).decode())
        try:
            arguments = msgspec.json.decode(call.arguments or "{}")
        except msgspec.DecodeError as exc:
            return CallError("malformed_json", f"the tool call's arguments are not JSON: {exc}", raw=call.arguments)
        if not isinstance(arguments, dict):
            return CallError("schema_mismatch", "the tool call's arguments are not an object", raw=call.arguments)
        return result.text or "", ToolCall(call.name, call.arguments or "{}", call.id)
    obj = result.data if isinstance(result.data, dict) else decode_json_object(None, result.text)
    if isinstance(obj, CallError):
        problem = "no tool call and no JSON action" if tool_calls else obj.message
        return CallError(obj.kind, problem, raw=result.text)
    return _action_of_json(obj, names, result.text)


def _tokens(messages: Sequence[Message]) -> int:
    return sum(conservative_tokens(m.content) + TEMPLATE_TOKENS_PER_MESSAGE
               + sum(conservative_tokens(c.arguments) + 4 for c in m.tool_calls) for m in messages)


def fit_conversation(messages: list[Message], context_length: int | None, reply_tokens: int) -> list[Message]:
    """``messages`` (system, task, then turns) within ``context_length`` tokens less the reply:
    the oldest observations shortened first, then the oldest turns dropped (module docstring)."""
    if context_length is None:
        return messages
    room = context_length - reply_tokens
    fitted = list(messages)
    for index in range(2, len(fitted) - 2):
        if _tokens(fitted) <= room:
            return fitted
        message = fitted[index]
        if message.role in ("tool", "user") and len(message.content) > OLD_OBSERVATION_CHARS:
            fitted[index] = msgspec.structs.replace(message, content=message.content[:OLD_OBSERVATION_CHARS] + " [...]")
    while _tokens(fitted) > room and len(fitted) > 4:
        del fitted[2:4]  # the oldest turn: an action and what answered it
    return fitted


class ReactAgent:
    """The built-in agent (module docstring), set up by ``config`` (``agent.*``)."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config

    def _system(self, episode: AgentEpisode, tools: Sequence[Tool], reply_tokens: int) -> Message:
        fmt = TOOLS_FORMAT if episode.tool_calls else fill(JSON_FORMAT, tools=_tool_list(tools))
        template, empty_context = (SYSTEM, EMPTY_CITABLE) if episode.citable else (SYSTEM_PLAIN, NO_INSTRUCTIONS)
        empty = fill(template, context=empty_context, format=fmt)
        first = episode.task.meta.get(SYSTEM_META, "").strip()
        context = episode.context.strip()
        if context and episode.context_length is not None:
            others = conservative_tokens(empty) + conservative_tokens(first) + conservative_tokens(episode.task.input) \
                + conservative_tokens(episode.observation) + 2 * TEMPLATE_TOKENS_PER_MESSAGE
            room = episode.context_length - reply_tokens - others
            context = cut_context(context, max(0, room) * 3)
        prompt = fill(template, context=context or empty_context, format=fmt)
        return Message("system", f"{first}\n\n{prompt}" if first else prompt)

    def _task(self, episode: AgentEpisode) -> Message:
        retry = ""
        if episode.feedback is not None or episode.previous_answer is not None:
            retry = fill(RETRY, previous_attempt=episode.previous_answer or "(no answer)",
                         feedback=episode.feedback or "(none)")
        observation = episode.observation[: self.config.observation_chars] or "(nothing yet)"
        return Message("user", fill(TASK, task=episode.task.input, retry_block=retry, observation=observation))

    async def run(self, episode: AgentEpisode) -> None:
        tools = (*episode.tools, FINISH if episode.citable else FINISH_PLAIN)
        names = {tool.name for tool in tools}
        use_tools = episode.tool_calls
        definitions = tool_definitions(tools) if use_tools else ()
        schema = None if use_tools else action_schema(tools)
        reply_tokens = bounds.REASONING_CHARS
        messages = [self._system(episode, tools, reply_tokens), self._task(episode)]
        unusable = 0
        while episode.steps_left > 0:
            result = await episode.chat(fit_conversation(messages, episode.context_length, reply_tokens),
                                        tools=definitions, schema=schema)
            if result.error is not None and result.error.kind in UNANSWERED_KINDS:
                return
            parsed = result.error if result.error is not None else parse_action(result, names, tool_calls=use_tools)
            if isinstance(parsed, CallError):
                episode.reject(parsed)
                unusable += 1
                if unusable >= MAX_UNUSABLE:
                    episode.fail("unparsed", f"{unusable} replies in a row gave no usable action ({parsed.message})")
                    return
                messages += [Message("assistant", result.text or ""),
                             Message("user", fill(UNUSABLE, problem=parsed.message[:200]))]
                continue
            unusable = 0
            thought, action = parsed
            if action.name == FINISH_ACTION:
                arguments = msgspec.json.decode(action.arguments or "{}")
                answer = arguments.get("answer")
                cited = [clean_id(str(i)) for i in arguments.get(CITED_ARGUMENT, []) if isinstance(i, str)]
                episode.finish(answer if isinstance(answer, str) else None, cited=[i for i in cited if i])
                return
            observation = await episode.act(action)
            shown = observation.text[: self.config.observation_chars]
            if use_tools:
                call = action if action.id else msgspec.structs.replace(action, id=f"call_{len(messages)}")
                messages += [Message("assistant", thought, (call,)), Message("tool", shown, tool_call_id=call.id)]
            else:
                reply = msgspec.json.encode({"thought": thought, "tool": action.name,
                                             "arguments": msgspec.json.decode(action.arguments)}).decode()
                messages += [Message("assistant", reply), Message("user", fill(OBSERVATION, observation=shown))]
