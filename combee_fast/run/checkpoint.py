"""The checkpoint of a training run: its :class:`~combee_fast.run.state.TrainState`, written
atomically after every completed step, so the run can go on after the process stopped
(``kill -9``, SIGINT, SIGTERM).

A resumed run continues from the last completed step and ends with the same final artifact as an
uninterrupted run with the same seed: the epoch order is drawn again from the seed tree and the
state holds the position in it; the batch plan's state (the controller's fit), best-so-far and
every running total are restored; work the method carried past the step (ACE's chains still
retrying, :mod:`combee_fast.combee.map`) is run again from its items against the snapshot it ran
on (requests are seeded by path, so they make the same calls and get the same answers from a
deterministic endpoint or the replay cache).

The run directory's append-only files (``ledger.jsonl``, ``controller.jsonl``, ``deltas.jsonl``,
``errors.jsonl``) may hold lines of a step that did not complete; their lengths at the checkpoint
are in ``state.files``, and reopening the run directory cuts them back to those lengths.

The file (``checkpoint.pkl``) is a pickle: it is read only from the user's own run directory.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from combee_fast.errors import ConfigError
from combee_fast.files import write_atomic
from combee_fast.run.state import STATE_FORMAT, TrainState

CHECKPOINT_FILE = "checkpoint.pkl"


def save_checkpoint(root: Path, state: TrainState[Any]) -> None:
    """Write ``state`` atomically into the run directory ``root``."""
    write_atomic(root / CHECKPOINT_FILE, pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))


def load_checkpoint(root: str | Path) -> TrainState[Any]:
    """The checkpointed state of the run in ``root``; :class:`ConfigError` in one line when there
    is none or it is unreadable."""
    path = Path(root) / CHECKPOINT_FILE
    try:
        state = pickle.loads(path.read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"{root}: no {CHECKPOINT_FILE}; not a resumable run directory") from None
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError,
            IndexError, KeyError) as exc:
        raise ConfigError(f"{path}: unreadable checkpoint: {exc}") from None
    if not isinstance(state, TrainState) or getattr(state, "format", None) != STATE_FORMAT:
        raise ConfigError(f"{path}: not a checkpoint of this version of combee")
    return state
