"""Learning from already-collected agent trajectories: no new rollouts are generated.

File format (JSONL, one trace per line; keys in any order)::

    {"id": "run-17",              # string, unique within the file's selected rows
     "task": "...",               # string: the task the agent was given
     "trajectory": "...",         # string: what the agent did (its reasoning, actions, outputs)
     "answer": "..." | null,      # string or null: the agent's final answer, if any
     "score": 0.0,                # number in [0, 1]: the outcome (1.0 = success)
     "feedback": "...",           # string: what the grader / environment reported
     "ground_truth": "..." | null,  # optional: the expected answer, when known
     "cited": ["..."],            # optional: ids of the learned context's parts the agent
                                  # cited (files written before name it "bullet_ids": read the same)
     "episode": {...},            # optional: the whole trajectory of an agent episode
                                  # (a run's trajectories.jsonl writes it)
     "version": 3}                # optional: the context version the agent ran with

:meth:`TracesTask.load_rollouts` turns each line into a scored round-0
:class:`~combee_fast.schema.Rollout` (usage role ``"trace"``, messages = the task as the user
message and the trajectory as the assistant message), ready for reflection. Splits as in
:mod:`combee_fast.tasks.jsonl`: ``path=`` (one split ``all``) or ``splits={name: file}``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import msgspec

from combee_fast.schema import Example, Message, Rollout, Trajectory, Usage
from combee_fast.errors import TaskDataError
from combee_fast.tasks.base import Score, Split, SplitManifest
from combee_fast.tasks.jsonl import split_files
from combee_fast.tasks.scorers import Scorer, make_scorer
from combee_fast.tasks.splits import select_rows

TRACE_ROLE = "trace"


class TraceRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One line of a traces file (see the module docstring)."""

    id: str
    task: str
    trajectory: str
    answer: str | None
    score: float
    feedback: str
    ground_truth: str | None = None
    cited: tuple[str, ...] = ()
    episode: Trajectory | None = None
    version: int | None = None


_DECODER = msgspec.json.Decoder(TraceRecord)

OLDER_CITED_KEY = "bullet_ids"
"""What a traces file written before named ``cited`` (a run's ``trajectories.jsonl`` included)."""


def decode_trace(line: bytes) -> TraceRecord:
    """One line of a traces file as its record; a line that names ``cited`` by its older key
    (:data:`OLDER_CITED_KEY`) reads the same. :class:`msgspec.DecodeError` when it is no record."""
    try:
        return _DECODER.decode(line)
    except msgspec.ValidationError:
        fields = msgspec.json.decode(line)
        if not (isinstance(fields, dict) and OLDER_CITED_KEY in fields and "cited" not in fields):
            raise
        fields["cited"] = fields.pop(OLDER_CITED_KEY)
        return msgspec.convert(fields, TraceRecord)


class TracesTask:
    """Recorded trajectories as a task. New answers (if any) are scored against ``ground_truth``."""

    def __init__(
        self,
        *,
        path: str | Path | None = None,
        splits: Mapping[str, str | Path] | None = None,
        scorer: str = "exact",
        name: str = "traces",
        **scorer_options: Any,
    ) -> None:
        self.name = name
        self._files = split_files(name, path, splits)
        self._scorer: Scorer = make_scorer(scorer, **scorer_options)

    def split_names(self) -> tuple[str, ...]:
        return tuple(self._files)

    def _records(self, split: str) -> tuple[SplitManifest, str, list[tuple[int, TraceRecord]]]:
        selected = select_rows(self.name, split, self._files)
        seen: dict[str, int] = {}
        records = []
        for index, row in selected.rows:
            try:
                record = decode_trace(row.data)
            except msgspec.DecodeError as exc:
                raise TaskDataError(str(selected.path), row.line, f"not a trace record: {exc}") from None
            if not (math.isfinite(record.score) and 0.0 <= record.score <= 1.0):
                raise TaskDataError(str(selected.path), row.line, f"score must be in [0, 1], got {record.score}")
            if record.id in seen:
                raise TaskDataError(
                    str(selected.path), row.line, f"duplicate id {record.id!r} (first on line {seen[record.id]})"
                )
            seen[record.id] = row.line
            records.append((index, record))
        return selected.manifest, selected.name, records

    @staticmethod
    def _example(index: int, record: TraceRecord, split: str) -> Example:
        return Example(index, record.task, record.ground_truth, split, {"trace_id": record.id})

    def load(self, split: str) -> Split:
        manifest, name, records = self._records(split)
        return Split(manifest, tuple(self._example(index, record, name) for index, record in records))

    def rollout_source(self) -> TracesTask:
        """This task learns from its collected rollouts (no generation)."""
        return self

    def load_rollouts(self, split: str) -> tuple[Rollout, ...]:
        """Every trace of ``split`` as a scored round-0 rollout, in file order."""
        _, name, records = self._records(split)
        return tuple(
            Rollout(
                example=self._example(index, record, name),
                round=0,
                messages=(Message("user", record.task), Message("assistant", record.trajectory)),
                answer=record.answer,
                reasoning=record.trajectory,
                cited=record.cited,
                score=record.score,
                feedback=record.feedback,
                usage=Usage(role=TRACE_ROLE),
                trajectory=record.episode,
                version=record.version,
            )
            for index, record in records
        )

    def scorable(self, example: Example) -> bool:
        """Whether a new answer to ``example`` can be scored: its trace has a ground truth (a
        validation split must hold only such examples)."""
        return example.target is not None

    def score(self, example: Example, answer: str | None) -> Score:
        if example.target is None:
            raise ValueError(
                f"{self.name} example {example.id} (trace {example.meta.get('trace_id')!r}) has no ground_truth: "
                "a new answer cannot be scored"
            )
        return self._scorer.score(answer, example.target)
