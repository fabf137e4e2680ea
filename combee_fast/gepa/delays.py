"""The environment's seconds on the asynchronous search's time, carried along what each task
waited for.

The schedule (:mod:`.pipeline`, "Time") leaves the environment's real seconds out of its tasks'
durations, so that a replayed run takes the same decisions. They lengthen the search's reported
time instead: a task ends late by the delay it started with plus its own environment seconds,
and a task starts with the largest delay among what it waited for:

- the previous stage of its own proposal (a proposal's *chain*);
- the pool, when the task's start read it (a parent's draw, a screening's staleness policy, a
  merge's decision, a validation held for the seed's): the latest delay of the candidates that
  joined it;
- the proposal slot and budget a new proposal took: the proposals that ended before it;
- the stage slot a queued task took: the tasks of that stage that ended before it.

A task that waited for none of these starts with none of their delays: two proposals that run
side by side do not delay each other. The search's time is the latest end plus its delay over
every task that ended (and never less than the schedule's clock). The estimate errs long only
where a slot or the pool is concerned: a task that waited for one waits for every delay of
what freed slots of that kind, or joined, before it.
"""

from __future__ import annotations

import msgspec


class EnvDelays(msgspec.Struct, kw_only=True):
    """The delays the search carries (module docstring): ``reach``, the latest end plus delay;
    ``pool``, the latest delay of a join; ``finished``, the largest delay a proposal ended with;
    ``freed``, per stage, the largest delay a task of it ended with."""

    reach: float = 0.0
    pool: float = 0.0
    finished: float = 0.0
    freed: dict[str, float] = msgspec.field(default_factory=dict)

    def admitted(self) -> float:
        """The delay a new proposal starts with: the pool it is drawn from, and the proposals
        whose end freed its slot and its budget."""
        return max(self.pool, self.finished)

    def after_pool(self, chain: float) -> float:
        """The delay of a proposal at ``chain`` once a decision of it read the pool as it now is."""
        return max(chain, self.pool)

    def start(self, chain: float, stage: str, *, queued: bool) -> float:
        """The delay a task of ``stage`` starts with, after ``chain`` (its proposal's), having
        ``queued`` for a slot of its stage."""
        return max(chain, self.freed.get(stage, 0.0)) if queued else chain

    def ended(self, stage: str, at: float, delay: float) -> None:
        """A task of ``stage`` ended at simulated time ``at`` with ``delay``."""
        self.freed[stage] = max(self.freed.get(stage, 0.0), delay)
        self.reach = max(self.reach, at + delay)

    def joined(self, delay: float) -> None:
        """A candidate whose validation ended with ``delay`` joined the pool."""
        self.pool = max(self.pool, delay)

    def done(self, delay: float) -> None:
        """A proposal ended with ``delay``."""
        self.finished = max(self.finished, delay)

    def time(self, clock: float) -> float:
        """The search's time when the schedule's clock reads ``clock``."""
        return max(clock, self.reach)
