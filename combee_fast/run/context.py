"""What a learner builds its methods and its evaluation from: one session's pieces."""

from __future__ import annotations

from dataclasses import dataclass

from combee_fast.config import SessionConfig
from combee_fast.protocols import Attempts, Task
from combee_fast.roles.agents import Agents
from combee_fast.schema import Example


@dataclass(frozen=True)
class LearnContext:
    """A session's configuration, task, role calls (``agents``; their clients in
    ``agents.clients``) and validation examples. ``from_traces``: the train items are collected
    rollouts (the map only reflects). ``attempts``: how an attempt at an example is made (None:
    one generator call; agent episodes otherwise)."""

    config: SessionConfig
    task: Task
    agents: Agents
    val_examples: tuple[Example, ...]
    from_traces: bool = False
    attempts: Attempts | None = None
