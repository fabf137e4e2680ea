"""What a learner builds its methods and its evaluation from: one session's pieces."""

from __future__ import annotations

from dataclasses import dataclass

from combee_fast.config import SessionConfig
from combee_fast.protocols.rollouts import Attempts
from combee_fast.protocols.tasks import Task
from combee_fast.roles.calls import RoleCalls
from combee_fast.schema import Example


@dataclass(frozen=True)
class LearnContext:
    """A session's configuration, task, role calls (``calls``, for the learner's declared roles;
    their clients in ``calls.clients``) and validation examples. ``from_traces``: the train items
    are collected rollouts (the map only reflects). ``attempts``: how an attempt at an example is
    made as an agent episode (None: the learner's own one-step attempt, one model call)."""

    config: SessionConfig
    task: Task
    calls: RoleCalls
    val_examples: tuple[Example, ...]
    from_traces: bool = False
    attempts: Attempts | None = None
