"""The memo learner: what it learns (:class:`Memo`), its two roles and its learner.

- ``act`` (requests ``memo_act``, pool ``serve``): an attempt at an example under the memo. On a
  task solved by acting it is an agent episode whose instructions are the memo; otherwise one
  call answering the question with the memo as its system message.
- ``note`` (``memo_note``, pool ``propose``): one lesson from an attempt and its outcome.

The generic methods drive :class:`MemoLearner`: its map attempts an item and notes a lesson; its
records are the notes, proposed and merged as they are (in code); its apply appends the notes the
memo lacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from combee_fast.methods.base import Applied
from combee_fast.protocols import NO_CALL, LearnerBase
from combee_fast.protocols.rollouts import Attempts
from combee_fast.protocols.tasks import Task
from combee_fast.roles.calls import RoleCalls
from combee_fast.roles.spec import Role
from combee_fast.schema import CallError, Example, GradedAnswer, Message, Trajectory, Usage

ACT = Role("act", "serve", 512, request_name="memo_act")
NOTE = Role("note", "propose", 256, request_name="memo_note")
ROLES = (ACT, NOTE)
"""The memo learner's roles, in call order."""

ANSWER_SCHEMA = {"type": "object", "properties": {"reasoning": {"type": "string"}, "final_answer": {"type": "string"}},
                 "required": ["reasoning", "final_answer"]}
NOTE_SCHEMA = {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}


class Memo(msgspec.Struct, frozen=True):
    """What the learner learns and deploys: lessons, one a line, numbered by the run."""

    memo: tuple[str, ...] = ()
    version: int = 0

    def __len__(self) -> int:
        return len(self.memo)

    def render(self) -> str:
        """The context text the serving role reads: each lesson as a ``- `` line."""
        return "\n".join(f"- {line}" for line in self.memo)

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(msgspec.json.encode(self))


class Change(msgspec.Struct, frozen=True):
    """What one apply changed: the lessons it added (none is rejected or evicted)."""

    added_ids: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()


class MemoTrace(msgspec.Struct, frozen=True):
    """One item's chain: its attempt, then the note written on it (None: the call failed)."""

    attempt: GradedAnswer
    note: str | None = None
    usage: Usage = NO_CALL
    error: CallError | None = None

    @property
    def item_id(self) -> str:
        return self.attempt.example.id

    @property
    def reward(self) -> float:
        return self.attempt.score

    @property
    def sim_seconds(self) -> float:
        return self.attempt.sim_seconds + self.usage.effective_latency_s

    def call_outcomes(self) -> list[tuple[Usage, CallError | None]]:
        return [*self.attempt.call_outcomes(), (self.usage, self.error)]

    def errors(self) -> list[tuple[str, CallError]]:
        return [*self.attempt.errors(), *((("note", self.error),) if self.error is not None else ())]

    def episodes(self) -> list[Trajectory]:
        return self.attempt.episodes()


def _field(name: str) -> Any:
    """A reply parser taking the string field ``name`` of its JSON object."""
    def parse(data: Any, text: str | None) -> str | CallError:
        value = data.get(name) if isinstance(data, dict) else None
        return value.strip() if isinstance(value, str) else CallError("schema_mismatch", f"no {name} in the reply",
                                                                      raw=text)
    return parse


class MemoLearner(LearnerBase[Memo, str, str]):
    """The memo learner of one run: ``task`` grades answers, ``calls`` makes its role calls,
    ``attempts`` (when given) makes each attempt an agent episode."""

    def __init__(self, task: Task, calls: RoleCalls, attempts: Attempts | None = None) -> None:
        self.task, self.calls, self.attempts = task, calls, attempts

    async def attempt(self, example: Example, text: str, *, epoch: int | str, version: int = 0) -> GradedAnswer:
        """``example`` attempted under the memo ``text``, graded."""
        if self.attempts is not None:
            rollout = await self.attempts.attempt(example, text, version=version, epoch=epoch)
            return GradedAnswer(example, rollout.answer, rollout.score or 0.0, rollout.feedback, rollout.usage,
                                rollout.error, rollout.trajectory)
        messages = (Message("system", text), Message("user", f"<question>\n{example.input}\n</question>"))
        request = self.calls.request(ACT.key, messages, epoch, example.id, schema=ANSWER_SCHEMA)
        result, answer = await self.calls.call(request, _field("final_answer"))
        if isinstance(answer, CallError):
            return GradedAnswer(example, None, 0.0, "", result.usage, answer)
        score = self.task.score(example, answer)
        return GradedAnswer(example, answer, score.value, score.feedback, result.usage)

    async def run_item(self, item: Example, artifact: Memo, text: str, *, epoch: int, rounds: int) -> MemoTrace:
        attempt = await self.attempt(item, text, epoch=epoch, version=artifact.version)
        if attempt.error is not None:
            return MemoTrace(attempt)
        outcome = "correct" if attempt.score >= 1.0 else "incorrect"
        prompt = (f"<question>\n{item.input}\n</question>\n<answer>\n{attempt.answer or ''}\n</answer>\n"
                  f"Outcome: {outcome}\nWrite the one lesson this attempt teaches.")
        request = self.calls.request(NOTE.key, (Message("user", prompt),), epoch, item.id, schema=NOTE_SCHEMA)
        result, note = await self.calls.call(request, _field("note"))
        if isinstance(note, CallError):
            return MemoTrace(attempt, None, result.usage, note)
        return MemoTrace(attempt, note or None, result.usage)

    def record(self, trace: MemoTrace) -> str | None:
        return trace.note

    async def apply(self, artifact: Memo, traces: Sequence[Any], edits: Sequence[str], source: str) -> Applied[Memo]:
        new = tuple(line for line in dict.fromkeys(edits) if line not in artifact.memo)
        memo = Memo(artifact.memo + new, artifact.version + 1) if new else artifact
        return Applied(memo, Change(new), new, ())
