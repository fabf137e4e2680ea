"""What the asynchronous search does with a stale child: one policy per class.

A child is *stale* when candidates joined the pool between the moment its parent was drawn (the
pool version it was proposed against) and the moment it is ready to be screened; its staleness
is how many joined. The policy decides, at that moment, how the child is screened:

- :class:`FullPolicy` (``full``): a stale child is re-screened against the pool as it now is.
  Its changes (the lines its merge dropped from and added to its parent's text) are made to the
  pool's current best candidate instead (:func:`~combee_fast.gepa.revisions.rebase`), and that
  rebased child is screened against the best, which is graded on the same minibatch: it joins
  the pool, as the best's child, only if it beats it. A fresh child, or one whose parent is
  still the best, is screened against its parent, as in the synchronous loop.
- :class:`GuardedPolicy` (``guarded``): a child more than ``bound`` versions stale is dropped
  before any call is made for it; a younger one is screened against its parent alone.

Either way a proposal that is never stale is screened exactly as the synchronous loop does it.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from combee_fast.errors import ConfigError


class Screening(msgspec.Struct, frozen=True):
    """How one child is screened: ``drop`` it unscreened, else grade it on its minibatch against
    its parent or, when ``rival`` is set, rebased onto that pool candidate and against it."""

    drop: bool = False
    rival: int | None = None


class StalenessPolicy(Protocol):
    """Decides how a child proposed against pool version ``proposed_at`` is screened now."""

    rescreens: bool
    """Whether the policy may grade a rival on the minibatch (the budget reserves for it)."""


    def screening(self, *, proposed_at: int, version: int, parent: int, best: int) -> Screening: ...


class FullPolicy:
    """Re-screen a stale child, rebased, against the pool's current best (module docstring)."""

    rescreens = True

    def screening(self, *, proposed_at: int, version: int, parent: int, best: int) -> Screening:
        stale = version > proposed_at and best != parent
        return Screening(rival=best if stale else None)


class GuardedPolicy:
    """Drop a child more than ``bound`` versions stale (module docstring)."""

    rescreens = False

    def __init__(self, bound: int) -> None:
        self.bound = bound

    def screening(self, *, proposed_at: int, version: int, parent: int, best: int) -> Screening:
        return Screening(drop=version - proposed_at > self.bound)


def staleness_policy(name: str, *, bound: int) -> StalenessPolicy:
    """The policy named ``name`` (``full`` or ``guarded``, the latter with ``bound``)."""
    if name == "full":
        return FullPolicy()
    if name == "guarded":
        return GuardedPolicy(bound)
    raise ConfigError(f"gepa.pipeline.staleness: unknown policy {name!r}; choose full or guarded")
