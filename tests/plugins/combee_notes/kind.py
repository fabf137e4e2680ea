"""The notes learner registered (a :class:`~combee_fast.protocols.LearnerKind`): the seven members
every learner has, and of the optional ones only what differs from combee_fast's defaults (its
size unit, its simulated-endpoint responders, its summary, its own settings and flag: a run's
``[learners.notes]`` section, :class:`NotesSettings`, and ``--max-notes``). Its methods are the generic ones:
``sequential`` (shown ``notes``), ``naive`` (``naive-notes``) and ``combee`` (``combee-notes``).

Named by path (``--learner combee_notes.kind:NOTES``) or, installed, by its entry point (``notes``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from combee_fast.config import SessionConfig
from combee_fast.errors import ConfigError
from combee_fast.methods import build_method
from combee_fast.methods.base import EvalResult
from combee_fast.protocols import Flag
from combee_fast.protocols.flags import positive_int
from combee_fast.protocols.running import Method
from combee_fast.run.context import LearnContext
from combee_fast.schema import Example, GradedAnswer

from .calls import ROLES, NotesCalls
from .learner import NotesLearner
from .notes import MAX_NOTES, Notes
from .sim import RESPONDERS


class NotesSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The notes learner's own settings: a run's ``[learners.notes]`` section."""

    max_notes: int = MAX_NOTES  # most notes kept, the oldest dropped past it


FLAGS = (Flag("--max-notes", path=("max_notes",), type=positive_int, help="notes: most notes kept, the oldest dropped"),)


class NotesKind:
    """What the notes learner learns and deploys: :class:`~.notes.Notes`."""

    name = "notes"
    roles = ROLES
    artifact_type = Notes
    size_unit = "notes"
    responders = RESPONDERS
    settings = NotesSettings
    flags = FLAGS

    def initial(self, config: SessionConfig) -> Notes:
        return Notes()

    def build_method(self, method: str, context: LearnContext) -> Method[Notes]:
        if context.from_traces:
            raise ConfigError("learner notes answers its own questions; it cannot learn from collected traces")
        config = context.config
        own = config.learner_settings(self.name, NotesSettings)
        learner = NotesLearner(NotesCalls(context.task, context.calls), max_notes=own.max_notes)
        return build_method(method, learner, config.map, config.combee, seed=config.seed)

    async def evaluate(self, context: LearnContext, deployable: Notes, examples: Sequence[Example]) -> EvalResult:
        """One answer per example, ``eval.parallel`` at once; the critical path is the slowest
        lane's (each lane answers its examples one after another)."""
        calls, room = NotesCalls(context.task, context.calls), asyncio.Semaphore(context.config.eval.parallel)
        text = deployable.render()

        async def one(example: Example) -> GradedAnswer:
            async with room:
                return await calls.answer(example, text, epoch="eval")

        answers = await asyncio.gather(*(one(example) for example in examples))
        lanes = [0.0] * context.config.eval.parallel
        for graded in answers:
            lanes[lanes.index(min(lanes))] += graded.usage.effective_latency_s
        return EvalResult.graded([(a.score, a.usage, a.error) for a in answers], max(lanes, default=0.0))

    def load(self, path: str | Path) -> Notes | None:
        return Notes.load(path)

    def summary(self, artifact: Notes) -> dict[str, Any]:
        return {"notes": len(artifact)}


NOTES = NotesKind()
"""The registered notes learner."""
