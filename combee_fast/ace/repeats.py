"""A curator's or reducer's reply stopped at its first repeat: :class:`RepeatCut`.

Qwen2.5-Coder-0.5B, curating on a 4-slot llama.cpp server, repeated one ADD until its reply held
the 8 operations the schema allows, and its reducer wrote out again lessons a proposal already
held: in a Combee run of ``bench/real_model.py`` (stop 44), 3,501 of 8,017 generated tokens went to the two
roles, and the playbook refused every repeat as a ``duplicate``. A grammar cannot forbid a repeat
(JSON Schema's ``uniqueItems`` is not a constraint llama.cpp's grammar can express), so the reply
is watched as it streams and stopped where the waste begins.

The rule (:class:`RepeatWatch`): the reply is cut before the first operation that

- writes (ADD or UPDATE) a lesson, word for word, that an earlier operation of the reply wrote,
  that the playbook shown in the prompt holds, or (a reducer) that an operation the reply keeps by
  reference holds;
- names (UPDATE or REMOVE) an entry an earlier operation of the reply named;

and before the first reference a reducer's ``keep`` lists twice. What is kept is the reply up to
the operation before it, closed into a complete JSON object of the role's shape: the operations
array ends there, and a reply cut inside ``keep`` gets an empty ``operations``. A model repeating
itself is looping, so nothing after the first repeat is waited for. Words are compared as the
parser and the playbook compare them: whitespace collapsed, ids without brackets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from combee_fast.roles.base import clean_id, one_line

_LESSON_LINE = re.compile(r"^\[([^\]\s]+)\] helpful=\d+ harmful=\d+ :: (.*)$", re.MULTILINE)
WRITES = ("ADD", "UPDATE")
"""Operation kinds that write a lesson."""
NAMES = ("UPDATE", "REMOVE")
"""Operation kinds that name an existing entry."""


def lessons_in(playbook_text: str) -> dict[str, str]:
    """The lessons of a rendered playbook (lines ``[id] helpful=.. harmful=.. :: lesson``) by id,
    each as the parser normalises a lesson (whitespace collapsed)."""
    return {bullet_id: one_line(lesson) for bullet_id, lesson in _LESSON_LINE.findall(playbook_text)}


class RepeatCut:
    """The :class:`~combee_fast.endpoint.calls.ReplyCut` of one curator or reducer request:
    ``held``, the lessons the playbook shown to the model holds (:func:`lessons_in`);
    ``references``, a reducer's proposal operations by reference (``P1.2``), as op objects in
    the operations format (``{}`` for a curator)."""

    def __init__(self, held: Iterable[str], references: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.held = frozenset(held)
        self.references = dict(references or {})

    def watch(self) -> RepeatWatch:
        return RepeatWatch(self.held, self.references)


class RepeatWatch:
    """Reads one reply (the module doc's rule). The reply's JSON is scanned once, a character at
    a time as it arrives: strings and escapes, the nesting, the top-level key each array belongs
    to, where each element of a top-level array begins and ends."""

    def __init__(self, held: frozenset[str], references: Mapping[str, Mapping[str, str]]) -> None:
        self._held = held
        self._references = references
        self._pieces: list[str] = []  # the reply so far, joined only when an element or a key ends
        self._length = 0
        self._stack: list[str] = []  # open containers, "{" or "["
        self._in_string = False
        self._escaped = False
        self._string_start = -1  # where the string being read began
        self._last_string = ""  # the last string closed at the top level: a key, once ':' follows
        self._key = ""  # the top-level key whose value is being read
        self._keys: list[str] = []  # the top-level keys seen, in order
        self._element_start = -1  # where the current element of a top-level array began
        self._element_end = -1  # where the last complete element of the array ended (-1: none yet)
        self._array_start = -1  # just after the current top-level array's "["
        self._written: set[str] = set()
        self._named: set[str] = set()
        self._kept: set[str] = set()

    def feed(self, delta: str) -> str | None:
        at = self._length
        self._pieces.append(delta)
        self._length += len(delta)
        for char in delta:
            cut = self._step(char, at)
            if cut is not None:
                return cut
            at += 1
        return None

    def _text(self) -> str:
        text = "".join(self._pieces)
        self._pieces = [text]
        return text

    def _step(self, char: str, at: int) -> str | None:
        """Read ``char``, the reply's character at ``at``; the cut reply when an element ending
        there repeats. Nothing before the first ``{`` is read (a preamble is not the object)."""
        stack = self._stack
        if not stack and char != "{":
            return None
        if self._in_string:
            if self._escaped:
                self._escaped = False
            elif char == "\\":
                self._escaped = True
            elif char == '"':
                self._in_string = False
                if len(stack) == 1:
                    self._last_string = self._text()[self._string_start + 1:at]
                elif len(stack) == 2 and stack[1] == "[":
                    return self._element(at + 1)
            return None
        if char == '"':
            self._in_string, self._string_start = True, at
            if len(stack) == 2 and stack[1] == "[":
                self._element_start = at
        elif char == ":" and len(stack) == 1:
            self._key = self._last_string
            self._keys.append(self._key)
        elif char in "{[":
            if len(stack) == 2 and stack[1] == "[":
                self._element_start = at
            elif len(stack) == 1 and char == "[":
                self._array_start, self._element_end = at + 1, -1
            stack.append(char)
        elif char in "}]":
            if stack:
                stack.pop()
            if len(stack) == 2 and stack[1] == "[" and char == "}":
                return self._element(at + 1)
        return None

    def _element(self, end: int) -> str | None:
        """An element of a top-level array ended at ``end``: the cut reply if it repeats, else
        None (and it is remembered)."""
        text = self._text()
        try:
            value = orjson.loads(text[self._element_start:end])
        except orjson.JSONDecodeError:
            value = None
        if self._repeats(value):
            return self._closed(text)
        self._element_end = end
        return None

    def _repeats(self, value: Any) -> bool:
        if self._key == "keep" and isinstance(value, str):
            reference = value.strip().upper()
            if reference in self._kept:
                return True
            self._kept.add(reference)
            if (kept := self._references.get(reference)) is not None:
                self._remember(kept)
            return False
        if self._key != "operations" or not isinstance(value, dict):
            return False
        kind = str(value.get("type", "")).strip().upper()
        lesson = one_line(str(value.get("content", "")))
        named = clean_id(str(value.get("bullet_id", "")))
        if (kind in WRITES and (lesson in self._written or lesson in self._held)) or (
                kind in NAMES and named and named in self._named):
            return True
        self._remember(value)
        return False

    def _remember(self, op: Mapping[str, Any]) -> None:
        kind = str(op.get("type", "")).strip().upper()
        if kind in WRITES:
            self._written.add(one_line(str(op.get("content", ""))))
        if kind in NAMES and (named := clean_id(str(op.get("bullet_id", "")))):
            self._named.add(named)

    def _closed(self, text: str) -> str:
        """The reply up to the last element before the repeat, made a complete object."""
        end = self._element_end if self._element_end >= 0 else self._array_start
        tail = "]"
        if "operations" not in self._keys:
            tail += ', "operations": []'
        return text[:end] + tail + "}"
