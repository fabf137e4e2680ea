"""ACE registered as a learner (:class:`~combee_fast.protocols.LearnerKind`): a playbook learned
by the generic methods of :mod:`combee_fast.methods` (``sequential``, ``naive``, ``combee``) over
:class:`~combee_fast.ace.learner.AceLearner`, scored by :func:`~combee_fast.ace.evaluate.evaluate`.
Its roles are answered on the simulated endpoint by :mod:`~combee_fast.ace.sim`. Members it
leaves out take their defaults (:mod:`combee_fast.kinds`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from combee_fast.ace.calls import AceCalls
from combee_fast.ace.evaluate import evaluate
from combee_fast.ace.learner import AceLearner
from combee_fast.ace.online import AceOnline
from combee_fast.ace.roles import ROLES
from combee_fast.ace.sim import RESPONDERS
from combee_fast.config import SessionConfig
from combee_fast.files import read_regular
from combee_fast.methods import METHODS, build_method
from combee_fast.methods.base import EvalResult
from combee_fast.ace.playbook import ApplyReport, Playbook
from combee_fast.protocols.learning import LearnContext
from combee_fast.protocols.running import Method
from combee_fast.roles.calls import RoleCalls
from combee_fast.schema import Example
from combee_fast.ace.records import OpKind


class AceKind:
    """The ACE learner: what it learns and deploys is a :class:`~combee_fast.ace.playbook.Playbook`."""

    name = "ace"
    methods = {name: name for name in METHODS}
    roles = ROLES
    citable = True  # an agent cites the bullets it used
    size_unit = "bullets"  # what the artifact's size counts, in progress lines and reports
    artifact_type = Playbook
    responders = RESPONDERS  # how the simulated endpoint answers its roles

    def encode_artifact(self, artifact: Playbook) -> bytes:
        return artifact.to_bytes()

    def decode_artifact(self, data: bytes) -> Playbook:
        return Playbook.from_bytes(data)

    def initial(self, config: SessionConfig) -> Playbook:
        return Playbook.empty(token_budget=config.token_budget)

    def build_method(self, method: str, context: LearnContext) -> Method[Playbook]:
        """``method`` over the session's role calls; collected traces have no rounds to carry."""
        config = context.config
        map_config = config.map
        if context.from_traces:
            map_config = msgspec.structs.replace(map_config, sync_rounds=None)
        learner = AceLearner(self.calls(context), max_rounds=map_config.max_rounds,
                             from_rollouts=context.from_traces, attempts=context.attempts)
        return build_method(method, learner, map_config, config.combee, seed=config.seed)

    def calls(self, context: LearnContext) -> AceCalls:
        """The role calls a run's steps and evaluation attempt, reflect and curate with."""
        return AceCalls(context.calls)

    def load(self, path: str | Path) -> Playbook | None:
        """The playbook at ``path``; None when it is another learner's file (a JSON object
        without ``bullets``); :class:`~combee_fast.errors.PlaybookFileError` when it is unreadable."""
        try:
            data = msgspec.json.decode(read_regular(path))
        except (OSError, msgspec.DecodeError):
            data = None
        if isinstance(data, dict) and "bullets" not in data:
            return None
        return Playbook.load(path)

    async def evaluate(self, context: LearnContext, deployable: Playbook, examples: Sequence[Example]) -> EvalResult:
        return await evaluate(self.calls(context), deployable, examples, concurrency=context.config.eval.parallel,
                              attempts=context.attempts)

    def version_files(self, artifact: Playbook) -> list[tuple[str, bytes]]:
        return [(f"playbooks/v{artifact.version:05d}.json", artifact.to_bytes())]

    def load_version(self, root: Path, version: int, config: SessionConfig) -> Playbook:
        return Playbook.load(root / f"playbooks/v{version:05d}.json") if version else self.initial(config)

    def lessons(self, artifact: Playbook) -> list[str]:
        return [bullet.content for bullet in artifact.bullets()]

    def summary(self, artifact: Playbook) -> dict[str, Any]:
        return {"bullets": len(artifact)}

    def improvements(self, report: ApplyReport) -> tuple[int, int]:
        """Content ops (ADD, UPDATE, REMOVE) the apply judged, and those that took effect; the
        TAG ops counting citations are not candidates."""
        accepted = len(report.applied) - report.tags_applied
        return accepted + sum(1 for r in report.rejected if r.op.kind is not OpKind.TAG), accepted

    def online_learner(self, calls: RoleCalls) -> AceOnline:
        """The learner of submitted rollouts: each is reflected on, never regenerated."""
        return AceOnline(calls)


ACE = AceKind()
"""The registered ACE learner."""
