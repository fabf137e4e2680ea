"""Answers for other learners' prompts (the peers bench): a model of reply *length and format*,
not of what a model would learn from them.

The task world plays our roles only: it reads our prompts by their tags and the role header. A
peer (the PyPI ``gepa`` package, say) sends its own prompts without a role header. On one shared
endpoint :class:`PeerRouter` sends requests whose role the world plays to it and every other one
to :class:`PeerReplies`, which answers with text of the length our own roles' replies have and
in the format the peer parses:

- **a task question** (the user message is an example's input, the system message the peer's
  instruction): the world's generator reasoning (same length as our solver's) and
  ``Final answer: <answer>``. The answer is drawn by the world (:meth:`TaskWorld.answer`, lessons
  read from the instruction as our solver does), seeded by the instruction's text, so two
  instructions differ in their answers as two real prompts would, and a peer's search accepts and
  rejects children at a realistic rate. A peer's accuracy still is not comparable with ours: its
  reflections write prose, not the world's lessons.
- **a merge of revisions** (lines ``[r.n] text``, our GEPA interop's aggregation prompt): JSON
  keeping every added line by reference.
- **a reflection** in our proposer's words (``<current_instruction>`` tags, as our GEPA interop
  sends it): our JSON, three sentences of reasoning and the instruction with one guidance line
  appended; in GEPA's default words (the current instruction in the first fenced block): the same
  reasoning, then the new instruction in a fenced block.
- **an optimizer step of the PyPI textgrad** (its prompt asks for ``<IMPROVED_VARIABLE>`` tags):
  three sentences, then the variable (the full system prompt its conversations show, else the
  span it is given) with one guidance line appended, between those tags.
- **a DSPy prompt** (fields marked ``[[ ## name ## ]]``, its chat adapter's format): every output
  field the prompt asks for, in order, then ``[[ ## completed ## ]]``. When an input field holds a
  task question, its reasoning and answer are the world's (lessons read from the system message,
  as for a task question above); otherwise each field gets a value of its declared type (two
  sentences of prose for text).
- **a TurboGEPA mutation request** (its strategies ask for ``Generate <n> ...`` prompts, each in
  ``<PROMPT>`` tags): one sentence, then ``n`` prompts (at most 64) between those tags, each its
  first parent prompt (``PROMPT A (...):`` and the quoted text) with one guidance line appended
  (numbered apart, so the ``n`` differ); with no parent shown (spec induction from examples
  alone), four sentences of prose each.
- **an AgentDescent rule proposal** (its reflector asks for ``exactly ONE concise, general
  rule``): one sentence, the rule.
- **a request with a JSON schema** (ace-framework's roles ask for structured output): an object
  of that schema (references and unions resolved, arrays empty), two sentences of prose in each
  string;
- **anything else**: six sentences of prose.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

import orjson

from combee_fast.sim.instructed import instruction_lessons
from combee_fast.sim.responders import Responder, SimReply, SimRequest, example_for_schema
from combee_fast.sim.world import TaskWorld, prose

FINAL_ANSWER = "Final answer:"
"""What a peer's reply puts before its answer (and GEPA's simulated proposer reads after it)."""

_CURRENT = re.compile(r"<current_instruction>\n(.*?)\n?</current_instruction>", re.DOTALL)
_FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
_REVISION_LINE = re.compile(r"^\[(\d+\.\d+)\] ", re.MULTILINE)
_IMPROVED = ("<IMPROVED_VARIABLE>", "</IMPROVED_VARIABLE>")
_FULL_VARIABLE = (re.compile(r"<LM_SYSTEM_PROMPT> (.*?) </LM_SYSTEM_PROMPT>", re.DOTALL),
                  re.compile(r"<VARIABLE> (.*?) </VARIABLE>", re.DOTALL))
_DSPY_REMINDER = "Respond with the corresponding output fields"
_DSPY_OUTPUT = re.compile(r"`\[\[ ## (\w+) ## \]\]`(?: \(must be formatted as a valid Python ([^)]*\)?)\))?")
_DSPY_FIELD = re.compile(r"^\[\[ ## (\w+) ## \]\]$", re.MULTILINE)
_LITERAL = re.compile(r"""Literal\[\s*['"]([^'"]*)['"]""")
_TURBO_TAGS = ("<PROMPT>", "</PROMPT>")
_TURBO_COUNT = re.compile(r"\bGenerate (\d+) ")
_TURBO_PARENT = re.compile(r'^PROMPT A \([^\n]*\):\n"', re.MULTILINE)
_TURBO_MAX_PROMPTS = 64
_AGENTDESCENT_RULE = "Propose exactly ONE concise, general rule"


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def _filled(schema: dict[str, Any], defs: dict[str, Any], seed: int, depth: int = 0) -> Any:
    """A value of ``schema``: ``$ref`` into ``defs`` followed, the first non-null branch of a
    union taken, objects filled field by field, strings with two sentences of prose."""
    if depth > 8:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _filled(defs.get(ref.removeprefix("#/$defs/"), {}), defs, seed, depth + 1)
    for union in ("anyOf", "oneOf", "allOf"):
        branches = [b for b in schema.get(union, ()) if b.get("type") != "null"]
        if branches:
            return _filled(branches[0], defs, seed, depth + 1)
    if schema.get("type") == "object" or "properties" in schema:
        return {
            name: _filled(sub, defs, seed + index, depth + 1)
            for index, (name, sub) in enumerate(schema.get("properties", {}).items())
        }
    if schema.get("type") == "string" and "enum" not in schema:
        return prose(2, "peer-field", seed)
    return example_for_schema(schema, prose(2, "peer-field", seed))


def _guided(current: str, seed: int) -> str:
    """``current`` with one guidance line appended (numbered by ``seed``, so revisions differ)."""
    return f"{current}\n- {prose(1, 'peer-guidance', seed)} ({seed % 9973})"


def _typed(annotation: str, seed: int) -> str:
    """A value a DSPy output field of Python type ``annotation`` ('' for text) parses."""
    kind = annotation.strip()
    if not kind or kind.startswith("str"):
        return prose(2, "peer-field", seed)
    if (literal := _LITERAL.search(kind)) is not None:
        return literal.group(1)
    for prefix, value in (("bool", "True"), ("int", "1"), ("float", "0.5"), ("list", "[]"), ("dict", "{}")):
        if kind.startswith(prefix):
            return value
    return prose(2, "peer-field", seed)


class PeerReplies:
    """A :class:`~combee_fast.sim.responders.Responder` for prompts the world cannot play
    (module docstring); ``world`` supplies the questions, answers and prose."""

    def __init__(self, world: TaskWorld) -> None:
        self.world = world

    def respond(self, request: SimRequest) -> str:
        system = "\n".join(m.content for m in request.messages if m.role == "system")
        prompt = request.last_user_content
        seed = _digest(system + "\x00" + prompt)
        question = self.world.question(prompt)
        if question is not None:
            entries = [(f"i{n}", lesson) for n, lesson in enumerate(instruction_lessons(system))]
            reply = self.world.answer(question, entries, "", _digest(system))
            return f"{reply['reasoning']}\n{FINAL_ANSWER} {reply['final_answer']}"
        refs = _REVISION_LINE.findall(prompt)
        if refs:
            return orjson.dumps({
                "reasoning": prose(3, "peer-merge", seed), "remove": [], "keep": list(dict.fromkeys(refs)), "add": [],
            }).decode()
        if _IMPROVED[0] in prompt:
            full = next((m for pattern in _FULL_VARIABLE if (m := pattern.search(prompt)) is not None), None)
            variable = _guided(full.group(1).strip() if full is not None else "", seed)
            return f"{prose(3, 'peer-tgd', seed)}\n{_IMPROVED[0]}{variable}{_IMPROVED[1]}"
        if _DSPY_REMINDER in prompt:
            return self._dspy(system, prompt, seed)
        if _TURBO_TAGS[0] in prompt and (count := _TURBO_COUNT.search(prompt)) is not None:
            return self._turbo(prompt, int(count.group(1)), seed)
        if _AGENTDESCENT_RULE in prompt:
            return prose(1, "peer-rule", seed)
        tagged = _CURRENT.search(prompt)
        if tagged is not None:
            instruction = _guided(tagged.group(1).strip("\n"), seed)
            return orjson.dumps({"reasoning": prose(3, "peer-reflect", seed), "instruction": instruction}).decode()
        fenced = _FENCED.search(prompt)
        if fenced is not None:
            instruction = _guided(fenced.group(1).strip("\n"), seed)
            return f"{prose(3, 'peer-reflect', seed)}\n```\n{instruction}\n```"
        if request.json_schema is not None:
            return orjson.dumps(_filled(request.json_schema, request.json_schema.get("$defs", {}), seed)).decode()
        return prose(6, "peer-other", seed)


    @staticmethod
    def _turbo(prompt: str, count: int, seed: int) -> str:
        """``count`` TurboGEPA prompts (at most :data:`_TURBO_MAX_PROMPTS`) in ``<PROMPT>`` tags
        (module docstring)."""
        parent = _TURBO_PARENT.search(prompt)
        current = None
        if parent is not None:
            end = prompt.find('"\n', parent.end())
            current = prompt[parent.end(): end if end >= 0 else len(prompt)].strip()
        prompts = [_guided(current, seed + k) if current else prose(4, "peer-spec", seed + k)
                   for k in range(max(1, min(count, _TURBO_MAX_PROMPTS)))]
        return "\n".join([prose(1, "peer-reflect", seed), *(f"{_TURBO_TAGS[0]}\n{p}\n{_TURBO_TAGS[1]}" for p in prompts)])

    def _dspy(self, system: str, prompt: str, seed: int) -> str:
        """Every output field the DSPy prompt asks for (module docstring)."""
        reminder = prompt.rfind(_DSPY_REMINDER)
        outputs = [(name, kind) for name, kind in _DSPY_OUTPUT.findall(prompt[reminder:]) if name != "completed"]
        pieces = _DSPY_FIELD.split(prompt[:reminder])
        inputs = [value.strip() for value in pieces[2::2]]
        question = next((q for value in inputs if (q := self.world.question(value)) is not None), None)
        values = {name: _typed(kind, seed + index) for index, (name, kind) in enumerate(outputs)}
        if question is not None and outputs:
            entries = [(f"i{n}", lesson) for n, lesson in enumerate(instruction_lessons(system))]
            reply = self.world.answer(question, entries, "", _digest(system))
            answer_field = next((name for name, _ in reversed(outputs) if name != "reasoning"), outputs[-1][0])
            values[answer_field] = str(reply["final_answer"])
            if "reasoning" in values:
                values["reasoning"] = str(reply["reasoning"])
        return "\n\n".join([*(f"[[ ## {name} ## ]]\n{value}" for name, value in values.items()), "[[ ## completed ## ]]"])


class PeerRouter:
    """Routes by role header: ``world_roles`` (our learners' request roles, the world's table:
    :attr:`RoleTable.responders <combee_fast.sim.responders.RoleTable.responders>`) to ``world``,
    everything else to ``peers``."""

    def __init__(self, world: Responder, peers: Responder, world_roles: Iterable[str]) -> None:
        self.world = world
        self.peers = peers
        self.world_roles = frozenset(world_roles)

    def respond(self, request: SimRequest) -> str | SimReply:
        return (self.world if request.role in self.world_roles else self.peers).respond(request)
