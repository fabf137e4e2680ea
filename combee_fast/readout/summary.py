"""What a run's ``summary.json`` holds, made once for ``combee learn`` and ``Session.train(out=...)``.

:func:`run_summary` is the summary of a run that ended (done, stopped early or interrupted);
:func:`failed_summary` the one of a run that raised; :func:`shown_at` is where its files are, as the
user named them; :class:`RerunCount` counts, from the run's
events, the episodes sent again after their worker was lost. The run directory
(:class:`~combee_fast.record.rundir.RunDir`) writes them.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from combee_fast.errors import CombeeError
from combee_fast.readout.predictions import batching_summary
from combee_fast.redact import scrub
from combee_fast.run.events import EpisodeRerun

if TYPE_CHECKING:
    from combee_fast.record.rundir import RunDir
    from combee_fast.run.train import TrainResult


def shown_at(out: str | os.PathLike[str], run_dir: RunDir) -> str:
    """Where the run's files are, as the user named the folder (``out``) when they are there."""
    return str(out) if run_dir.location == Path(out) else str(run_dir.location)


def resume_command(shown: str) -> str:
    """The command that resumes the run whose files are at ``shown``."""
    return f"combee learn --resume {shlex.quote(shown)}"


def run_summary(result: TrainResult, shown: str, *, interrupted_by: str | None = None, reruns: int = 0,
                resumed_from: int | None = None) -> dict[str, Any]:
    """The summary of the run ``result`` whose files are at ``shown``: its cost, its scores, the
    learner's own figures, the calls per role and each role's generated tokens per item learned from and the calls in flight per role (requested and achieved), the
    start-up probe's batching curve with the planner's predicted against measured step seconds
    (``batching``, :func:`~combee_fast.readout.predictions.batching_summary`); the llama.cpp servers'
    own count of their work (``server_work``: prompt tokens read and cached, seconds reading and
    generating, the share reading took, the servers counted; only when an endpoint is a llama.cpp
    server serving its counters, as ``--local``'s is); ``resent``: requests sent once
    more on a new connection after their reused keep-alive connection closed unanswered (not
    retries: :attr:`~combee_fast.endpoint.client.EndpointClient.resent`); with agent episodes their counts and environment
    seconds (``reruns``: episodes sent again); ``resumed_from``: the step a resumed run went on
    from; an interrupted run (``interrupted_by``: the signal) names the command resuming it."""
    summary: dict[str, Any] = {
        "learner": result.learner, "method": result.method, "samples": result.samples, "calls": result.calls,
        "tokens": result.tokens, "rollouts": result.rollouts,
        "gpu_seconds": None if result.gpu_seconds is None else round(result.gpu_seconds, 3),
        "train_sim_seconds": round(result.train_sim_seconds, 3),
        "train_wall_seconds": round(result.train_wall_seconds, 3),
        "final_val_accuracy": None if result.final_eval is None else result.final_eval.accuracy,
        "best_val_accuracy": result.best_val_accuracy, **result.summary,
        "concurrency": result.concurrency, "concurrency_notes": list(result.concurrency_notes),
        "run_dir": shown,
        "final_val_answered": None if result.final_eval is None else result.final_eval.answered,
        "final_val_unanswered": None if result.final_eval is None else result.final_eval.unanswered,
        "accounting": {"train": msgspec.to_builtins(result.counts),
                       "validation": msgspec.to_builtins(result.val_counts)},
        "generated_tokens_per_item": result.counts.generated_per_item(result.samples),
        "resent": result.resent,
        "batching": batching_summary(result.batching, result.ledger),
    }
    if result.server_work is not None:
        work = result.server_work
        summary["server_work"] = {**msgspec.to_builtins(work), "prefill_share": work.prefill_share,
                                  "cached_share": work.cached_share}
    if result.episodes:
        summary.update(episodes=result.episodes, episodes_failed=result.episodes_failed,
                       env_seconds=round(result.env_seconds, 3),
                       env_seconds_per_episode=round(result.env_seconds / result.episodes, 4),
                       episodes_rerun=reruns)
    if resumed_from is not None:
        summary["resumed_from_step"] = resumed_from
    if result.interrupted:
        summary.update(interrupted=interrupted_by, steps_completed=result.steps, resume_command=resume_command(shown))
    if result.stopped_by is not None:
        summary["stopped_by"] = result.stopped_by
    return summary


def failed_summary(error: CombeeError, shown: str) -> dict[str, Any]:
    """The summary of a run that raised ``error`` (a retry's refusal then names it as failed)."""
    return {"failed": scrub(str(error)), "exit_code": error.exit_code, "run_dir": shown}


class RerunCount:
    """Counts the episodes sent again after their worker was lost (``EpisodeRerun`` events)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, event: object) -> None:
        if isinstance(event, EpisodeRerun):
            self.count += 1
