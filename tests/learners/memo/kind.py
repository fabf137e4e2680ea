"""The memo learner registered (a :class:`~combee_fast.protocols.LearnerKind`): the seven members
every learner has, its size unit and its simulated-endpoint responders; every other member takes
its default (:mod:`combee_fast.kinds`). Its methods are the generic ones: ``sequential`` (shown
``memo``), ``naive`` (``naive-memo``) and ``combee`` (``combee-memo``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import msgspec

from combee_fast.config import SessionConfig
from combee_fast.files import read_regular
from combee_fast.memo.learner import ROLES, Memo, MemoLearner
from combee_fast.memo.sim import RESPONDERS
from combee_fast.methods import build_method
from combee_fast.methods.base import EvalResult
from combee_fast.protocols.running import Method
from combee_fast.run.context import LearnContext
from combee_fast.schema import Example, GradedAnswer


class MemoKind:
    """The memo learner: what it learns and deploys is a :class:`~combee_fast.memo.learner.Memo`."""

    name = "memo"
    roles = ROLES
    artifact_type = Memo
    size_unit = "lessons"
    responders = RESPONDERS

    def initial(self, config: SessionConfig) -> Memo:
        return Memo()

    def build_method(self, method: str, context: LearnContext) -> Method[Memo]:
        config = context.config
        learner = MemoLearner(context.task, context.calls, context.attempts)
        return build_method(method, learner, config.map, config.combee, seed=config.seed)

    async def evaluate(self, context: LearnContext, deployable: Memo, examples: Sequence[Example]) -> EvalResult:
        """One attempt per example, ``eval.parallel`` at once; the critical path is the slowest
        lane's (each lane attempts its examples one after another)."""
        learner = MemoLearner(context.task, context.calls, context.attempts)
        room, text = asyncio.Semaphore(context.config.eval.parallel), deployable.render()

        async def one(example: Example) -> GradedAnswer:
            async with room:
                return await learner.attempt(example, text, epoch="eval", version=deployable.version)

        attempts = await asyncio.gather(*(one(example) for example in examples))
        lanes = [0.0] * context.config.eval.parallel
        for graded in attempts:
            lanes[lanes.index(min(lanes))] += graded.sim_seconds
        return EvalResult.graded([(a.score, a.usage, a.error) for a in attempts], max(lanes, default=0.0))

    def load(self, path: str | Path) -> Memo | None:
        """The memo at ``path``; None when it is another learner's file (no ``memo`` in it)."""
        try:
            data = msgspec.json.decode(read_regular(path))
        except (OSError, msgspec.DecodeError):
            return None
        return msgspec.convert(data, Memo) if isinstance(data, dict) and "memo" in data else None


MEMO = MemoKind()
