"""ACE learning online (:mod:`combee_fast.embedded`): :class:`AceOnline`, the
:class:`~combee_fast.protocols.OnlineLearning` :meth:`AceKind.online_learner
<combee_fast.ace.kind.AceKind.online_learner>` gives. Each submitted rollout is reflected on
(never generated again); the reflections go through the curator groups and the reducer tree, as
offline; its one-step attempt is one generator call; its artifact, a
:class:`~combee_fast.ace.playbook.Playbook`, travels as playbook-file JSON.
"""

from __future__ import annotations

from combee_fast.ace.calls import AceCalls
from combee_fast.ace.learner import AceLearner
from combee_fast.config import MapConfig
from combee_fast.ace.playbook import Playbook
from combee_fast.roles.calls import RoleCalls


class AceOnline(AceLearner):
    """The playbook learner of submitted rollouts on the role calls ``calls`` (module docstring)."""

    def __init__(self, calls: RoleCalls) -> None:
        super().__init__(AceCalls(calls), max_rounds=MapConfig().max_rounds, from_rollouts=True)

    def encode_artifact(self, artifact: Playbook) -> bytes:
        return artifact.to_bytes()

    def decode_artifact(self, data: bytes) -> Playbook:
        return Playbook.from_bytes(data)
