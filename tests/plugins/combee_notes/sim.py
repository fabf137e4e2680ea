"""How combee_fast's simulated endpoint answers the notes learner's roles: :data:`RESPONDERS`
(request role name -> ``responder(world, request)``), given by the kind as ``responders``.

A small model of the learner's world, read from the task world's examples (``world.task``):

- **answer**: right with :data:`KNOWN_ACCURACY` when a note names the question's unit (the
  formula it asks for; for other tasks its expected answer), else with :data:`BASE_ACCURACY`;
  drawn by the request's seed and the question (two methods asking the same question in the same
  epoch get the same draw);
- **critic**: names the unit (``<unit>: ...``) with :data:`NAMES_UNIT` (less without the expected
  answer), else writes a general note;
- **editor**: adds the proposed notes about units no note names yet, unit notes first, at most
  about ``1.5 * sqrt(n) + 0.5`` of ``n`` proposed (an editor reading many keeps few: the overload
  Combee's parallel editors avoid); a merge keeps up to ``3 * sqrt(n) + 8`` of ``n``.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Sequence
from typing import Any

import msgspec

from combee_fast.schema import Example
from combee_fast.sim.responders import RoleResponder, SimRequest

from .calls import ANSWER, CRITIC, EDITOR

BASE_ACCURACY = 0.55
KNOWN_ACCURACY = 0.9
NAMES_UNIT = 0.9
NAMES_UNIT_BLIND = 0.5
FACTS = ("take every input from the question and check its units first",
         "write the rule out before putting numbers in",
         "round only the final result")
GENERAL = ("General: read the question twice", "General: answer with the value alone")

_TAGS = {name: re.compile(rf"<{name}>\n(.*?)\n?</{name}>", re.DOTALL) for name in
         ("notes", "question", "expected", "proposed", "choices")}


def _tag(text: str, name: str) -> str:
    match = _TAGS[name].search(text)
    return match[1].strip() if match else ""


def _uniform(*parts: object) -> float:
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64


@functools.cache
def _examples(task: Any) -> dict[str, Example]:
    """Every example of ``task``'s splits, by question."""
    return {e.input.strip(): e for split in task.split_names() for e in task.load(split).examples}


def _unit(example: Example) -> str:
    return str(example.meta.get("formula") or example.target)


def _unit_of(note: str) -> str:
    return note.split(":", 1)[0].strip()


def _lines(text: str) -> list[str]:
    return [line[2:].strip() for line in text.splitlines() if line.startswith("- ")]


def _reply(**fields: object) -> str:
    return msgspec.json.encode(fields).decode()


def _user(request: SimRequest) -> str:
    return request.last_user_content


def answer(world: Any, request: SimRequest) -> str:
    question = _tag(_user(request), "question")
    example = _examples(world.task).get(question)
    if example is None:
        return _reply(answer="")
    system = "\n".join(m.content for m in request.messages if m.role == "system")
    known = any(_unit_of(note) == _unit(example) for note in _lines(_tag(system, "notes")))
    right = _uniform("answer", request.seed, question) < (KNOWN_ACCURACY if known else BASE_ACCURACY)
    return _reply(answer=str(example.target) if right else "not sure")


def critic(world: Any, request: SimRequest) -> str:
    prompt = _user(request)
    question = _tag(prompt, "question")
    example = _examples(world.task).get(question)
    naming = NAMES_UNIT if _tag(prompt, "expected") else NAMES_UNIT_BLIND
    if example is None or _uniform("critic", request.seed, question) >= naming:
        return _reply(note=GENERAL[int(_uniform("general", request.seed, question) * len(GENERAL))])
    fact = FACTS[int(_uniform("fact", request.seed, question) * len(FACTS))]
    return _reply(note=f"{_unit(example)}: {fact}")


def _kept(fresh: Sequence[str], read: int, capacity: float, seed: int | None) -> list[str]:
    """The first of ``fresh`` an editor that read ``read`` notes keeps (``capacity``, rounded by a draw)."""
    expected = min(float(len(fresh)), capacity)
    count = int(expected) + (_uniform("kept", seed, read) < expected - int(expected))
    return list(fresh[:count])


def _fresh(notes: str, proposed: Sequence[str]) -> list[str]:
    held = {_unit_of(note) for note in _lines(notes)}
    fresh: dict[str, str] = {}
    for note in proposed:
        if _unit_of(note) not in held:
            fresh.setdefault(_unit_of(note), note)
    return sorted(fresh.values(), key=lambda note: _unit_of(note) == "General")


def editor(world: Any, request: SimRequest) -> str:
    prompt = _user(request)
    if "<choices>" in prompt:
        read = _lines(_tag(prompt, "choices"))
        return _reply(add=_kept(_fresh(_tag(prompt, "notes"), read), len(read), 3 * math.sqrt(len(read)) + 8,
                                request.seed))
    read = _lines(_tag(prompt, "proposed"))
    return _reply(add=_kept(_fresh(_tag(prompt, "notes"), read), len(read), 1.5 * math.sqrt(len(read)) + 0.5,
                            request.seed))


RESPONDERS: dict[str, RoleResponder] = {ANSWER.key: answer, CRITIC.key: critic, EDITOR.key: editor}
"""The notes learner's roles as the simulated endpoint answers them."""
