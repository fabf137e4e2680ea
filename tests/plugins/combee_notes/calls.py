"""The notes learner's roles and their calls, made with combee_fast's generic call kit
(:class:`~combee_fast.roles.calls.RoleCalls`: sampling, seeds, accounting, failures).

- **answer** (requests ``notes_answer``, pool ``serve``): the notes as the system message, the
  question as the user message; the answer is graded by the task.
- **critic** (``notes_critic``, pool ``propose``): one note from one graded answer.
- **editor** (``notes_editor``, pool ``propose``): which proposed notes join the list (a step's
  proposal), and several editors' choices merged into one (the reduce).

No call raises for a bad endpoint or reply: the failure is on what it returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from combee_fast.protocols.tasks import Task
from combee_fast.roles.base import convert, decode_json_object, fill, load_prompt
from combee_fast.roles.calls import RoleCalls
from combee_fast.roles.spec import Role
from combee_fast.schema import CallError, Example, GradedAnswer, Message, Usage

ANSWER = Role("answer", "serve", 256, request_name="notes_answer",
              prompts=("combee_notes/prompts/answer_system.txt", "combee_notes/prompts/answer.txt"))
CRITIC = Role("critic", "propose", 256, request_name="notes_critic", diverse=True,
              prompts=("combee_notes/prompts/critic.txt",))
EDITOR = Role("editor", "propose", 1024, request_name="notes_editor",
              prompts=("combee_notes/prompts/edit.txt", "combee_notes/prompts/merge.txt"))
ROLES = (ANSWER, CRITIC, EDITOR)
"""The notes learner's roles, in call order."""

ANSWER_SYSTEM, ANSWER_USER = load_prompt("answer_system.txt", beside=__file__), load_prompt("answer.txt", beside=__file__)
CRITIC_USER = load_prompt("critic.txt", beside=__file__)
EDIT_USER, MERGE_USER = load_prompt("edit.txt", beside=__file__), load_prompt("merge.txt", beside=__file__)


def _object(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


_TEXT = {"type": "string", "maxLength": 400}
ANSWER_SCHEMA = _object(answer=_TEXT)
NOTE_SCHEMA = _object(note=_TEXT)
ADD_SCHEMA = _object(add={"type": "array", "items": _TEXT, "maxItems": 64})


class _Answer(msgspec.Struct):
    answer: str | int | float


class _Note(msgspec.Struct):
    note: str


class _Add(msgspec.Struct):
    add: list[str]


class Note(msgspec.Struct, frozen=True):
    """The critic's note on one graded answer (what the editor reads)."""

    item_id: str
    text: str
    usage: Usage
    error: CallError | None = None


class Choice(msgspec.Struct, frozen=True):
    """An editor's chosen notes, the call's usage and its error."""

    notes: tuple[str, ...]
    usage: Usage
    error: CallError | None = None


def bullets(lines: Sequence[str]) -> str:
    return "\n".join(f"- {line}" for line in lines)


class NotesCalls:
    """The notes learner's calls on ``calls`` (a run's role calls); ``task`` grades answers."""

    def __init__(self, task: Task, calls: RoleCalls) -> None:
        self.task, self.calls = task, calls

    async def answer(self, example: Example, notes: str, *, epoch: int | str) -> GradedAnswer:
        """``example`` answered after reading ``notes``, graded."""
        messages = (Message("system", fill(ANSWER_SYSTEM, notes=notes)),
                    Message("user", fill(ANSWER_USER, question=example.input)))
        request = self.calls.request(ANSWER.key, messages, epoch, example.id, schema=ANSWER_SCHEMA)
        result, reply = await self.calls.call(request, lambda data, text: self._parsed(data, text, _Answer))
        if isinstance(reply, CallError):
            score = self.task.score(example, None)
            return GradedAnswer(example, None, score.value, score.feedback, result.usage, reply)
        answer = str(reply.answer).strip()
        score = self.task.score(example, answer)
        return GradedAnswer(example, answer, score.value, score.feedback, result.usage)

    async def critique(self, graded: GradedAnswer, *, epoch: int | str) -> Note:
        """One note from ``graded`` (the expected answer shown when the run uses ground truth)."""
        example = graded.example
        expected = example.target if self.calls.use_ground_truth and example.target is not None else ""
        user = fill(CRITIC_USER, question=example.input, answer=graded.answer or "(no answer)", expected=str(expected),
                    feedback=graded.feedback or "")
        request = self.calls.request(CRITIC.key, (Message("user", user),), epoch, example.id, schema=NOTE_SCHEMA)
        result, reply = await self.calls.call(request, lambda data, text: self._parsed(data, text, _Note))
        if isinstance(reply, CallError):
            return Note(example.id, "", result.usage, reply)
        return Note(example.id, " ".join(reply.note.split()), result.usage)

    async def edit(self, notes: str, proposed: Sequence[str], *, seed_path: tuple[int | str, ...]) -> Choice:
        """Which of ``proposed`` join ``notes``."""
        user = fill(EDIT_USER, notes=notes, proposed=bullets(proposed))
        return await self._choose(user, seed_path)

    async def merge(self, notes: str, choices: Sequence[Sequence[str]], *, seed_path: tuple[int | str, ...]) -> Choice:
        """Several editors' ``choices`` (made against ``notes``) as one."""
        blocks = "\n\n".join(f"### Choice {n}\n{bullets(chosen)}" for n, chosen in enumerate(choices, start=1))
        return await self._choose(fill(MERGE_USER, notes=notes, choices=blocks), seed_path)

    async def _choose(self, user: str, seed_path: tuple[int | str, ...]) -> Choice:
        request = self.calls.request(EDITOR.key, (Message("user", user),), *seed_path, schema=ADD_SCHEMA)
        result, reply = await self.calls.call(request, lambda data, text: self._parsed(data, text, _Add))
        if isinstance(reply, CallError):
            return Choice((), result.usage, reply)
        return Choice(tuple(line for line in (" ".join(note.split()) for note in reply.add) if line), result.usage)

    @staticmethod
    def _parsed(data: Any, text: str | None, shape: type[Any]) -> Any:
        obj = decode_json_object(data, text)
        return obj if isinstance(obj, CallError) else convert(obj, shape, text, what=shape.__name__)
