"""What a learning step returns, shared by every method."""

from __future__ import annotations

from typing import Any

import msgspec

from combee_fast.playbook import ApplyReport, Playbook
from combee_fast.playbook.deltalog import LoggedDelta
from combee_fast.schema import Proposal


class Applied(msgspec.Struct, frozen=True):
    """One apply: the new artifact, its report, the lessons it kept, its replayable log entries."""

    artifact: Playbook
    report: ApplyReport
    kept: tuple[str, ...]
    log: tuple[LoggedDelta, ...]


class StepResult(msgspec.Struct, frozen=True):
    """What one learning step did. ``playbook`` is the snapshot after its apply(s); ``sim_seconds``
    the step's critical path in the endpoint's (simulated) seconds."""

    playbook: Playbook
    reports: tuple[ApplyReport, ...]
    traces: tuple[Any, ...]
    proposals: tuple[Proposal, ...]
    sim_seconds: float
    wall_seconds: float
    insights: tuple[str, ...]
    kept: tuple[str, ...]
    log: tuple[LoggedDelta, ...] = ()  # the applies that changed the playbook, replayable


class StepShape(msgspec.Struct, frozen=True):
    """Per-step overrides of the method's shape, set by a batch plan (None: the configured value).

    ``max_group``: records one curator reads; ``duplicates``: p of the augmented shuffle;
    ``shuffle_salt`` > 0 draws the shuffle from a new seed path (a diversity remedy)."""

    max_group: int | None = None
    duplicates: int | None = None
    shuffle_salt: int = 0
