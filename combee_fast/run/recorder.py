"""The run directory's record of a run's events: :class:`RunRecord`, a critical consumer.

    StepDone          a line of ``ledger.jsonl``
    CallFailed        a line of ``errors.jsonl`` (role, kind, label, message, status, raw reply)
    CallReplied       a line of ``replies.jsonl`` (the step it came in, role, reply cut to
                      :data:`~combee_fast.engine.events.REPLY_KEPT` characters, failure label):
                      every call's answer, whatever its role, up to the file's bound
                      (:data:`~combee_fast.record.rundir.REPLIES_KEPT_BYTES`; said once on stderr
                      when reached)
    EpisodeFailed     a line of ``errors.jsonl`` (its kind, message, the step, the action there
                      and what the environment answered)
    EpisodeRerun      a line of ``errors.jsonl`` (kind ``worker_lost``, ``rerun`` true: the episode goes on)
    EpisodeFinished   a line of ``trajectories.jsonl``, in the ``traces`` task's format
                      (:func:`~combee_fast.rollouts.journal.trace_record`)

Every line is written as its event comes. Subscribe it with ``critical=True``: a line that cannot
be written raises through the emitter and stops the run, since a run that cannot keep its record
must not go on.
"""

from __future__ import annotations

import sys

import msgspec

from combee_fast.record.rundir import REPLIES_KEPT_BYTES, RunDir
from combee_fast.rollouts.journal import trace_record
from combee_fast.run.events import (CallFailed, CallReplied, EpisodeFailed, EpisodeFinished, EpisodeRerun, Event,
                                    StepDone)


class RunRecord:
    """Writes the events of a run into ``run_dir`` (module docstring); other events are passed
    over. ``steps``: the steps the run completed before (a resumed run's)."""

    def __init__(self, run_dir: RunDir, *, steps: int = 0) -> None:
        self.run_dir = run_dir
        self.step = steps + 1  # the step the calls now belong to (its validation's too)

    def __call__(self, event: Event) -> None:
        if isinstance(event, CallReplied):
            if self.run_dir.append_reply({"step": self.step, **msgspec.structs.asdict(event)}):
                print(f"combee: {self.run_dir.target / 'replies.jsonl'} reached its bound of "
                      f"{REPLIES_KEPT_BYTES >> 20} MiB: the run's later replies are not kept (its calls are still "
                      "counted)", file=sys.stderr, flush=True)
        elif isinstance(event, StepDone):
            self.step = event.row.step + 2
            self.run_dir.append_ledger(event.row)
        elif isinstance(event, CallFailed):
            self.run_dir.append_error(event.record())
        elif isinstance(event, (EpisodeFailed, EpisodeRerun)):
            self.run_dir.append_episode_failure(event.record())
        elif isinstance(event, EpisodeFinished):
            self.run_dir.append_trajectory(trace_record(event.trajectory, event.example))
