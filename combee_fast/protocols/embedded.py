"""The release seam: how a version reaches users (:mod:`combee_fast.embedded`).

- :class:`EmbeddedLearner`: an online learner inside a host (in its loop, a thread or a child
  process): submit rollouts, read the version in service (per request key), release by policy,
  never block.

Value types: :class:`~combee_fast.schema.Rollout`, :class:`~combee_fast.embedded.release.Context`,
:class:`~combee_fast.embedded.release.Release`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from combee_fast.schema import Rollout


class EmbeddedLearner(Protocol):
    """An online learner inside a host (:mod:`combee_fast.embedded`): the host submits finished
    rollouts and reads the latest published version; nothing it calls blocks its event loop."""

    async def start(self) -> None: ...

    async def stop(self) -> None:
        """Apply everything submitted, settle every ticket, then stop."""
        ...

    async def submit(self, rollout: Rollout, *, version: int | None = None) -> asyncio.Future[Any]:
        """Queue ``rollout`` (waits only for room), stamped with ``version``, the context
        version it was produced with, when given; a future of the batch that applied it."""
        ...

    def context_for(self, key: str) -> Any:
        """The version and text the request keyed ``key`` runs with (the release gate's
        :class:`~combee_fast.embedded.release.Context`: sticky per key); never blocks."""
        ...

    @property
    def release(self) -> Any:
        """Which versions serve requests now (:class:`~combee_fast.embedded.release.Release`)."""
        ...

    async def approve(self, version: int) -> None:
        """Promote candidate ``version`` (a ReleaseError if it is not the candidate)."""
        ...

    async def reject(self, version: int) -> None:
        """Roll candidate ``version`` back (a ReleaseError if it is not the candidate)."""
        ...

    async def propose(self, artifact: Any) -> int:
        """Hand ``artifact`` (an artifact of the online learner, e.g. learned offline) to the
        release as the next version; its number."""
        ...

    @property
    def text(self) -> str:
        """The version in service (the incumbent), rendered."""
        ...

    @property
    def artifact(self) -> Any:
        """The version in service (the incumbent): a :class:`~combee_fast.protocols.Releasable`."""
        ...

    @property
    def batches(self) -> Sequence[Any]:
        """The latest applied batches (bounded)."""
        ...

    def usage_totals(self) -> dict[tuple[str, str, str], Any]:
        """Usage of the learner's own clients, keyed by (role, model, endpoint)."""
        ...
