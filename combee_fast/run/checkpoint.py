"""The checkpoint of an offline training run: everything needed to continue it after the process
stopped (``kill -9``, SIGINT, SIGTERM), written atomically after every completed step.

A resumed run continues from the last completed step and ends with the same final playbook as an
uninterrupted run with the same seed: the epoch order is drawn again from the seed tree and the
checkpoint holds the position in it; the batch plan's state (the controller's fit), best-so-far,
the failure watch's window and every cumulative total are restored; chains carried past the step
(:mod:`combee_fast.combee.map`) are run again from their item against the snapshot they ran on
(their requests are seeded by path, so they make the same calls and get the same answers from a
deterministic endpoint or the replay cache).

The run directory's append-only files (``ledger.jsonl``, ``controller.jsonl``, ``deltas.jsonl``)
may hold lines of a step that did not complete; their lengths at the checkpoint are recorded, and a
resume cuts them back to those lengths.

The file (``checkpoint.pkl``) is a pickle: it is read only from the user's own run directory.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from combee_fast.errors import ConfigError
from combee_fast.files import write_atomic
from combee_fast.playbook import Playbook
from combee_fast.run.evaluate import EvalResult
from combee_fast.run.ledger import CallCounts

CHECKPOINT_FILE = "checkpoint.pkl"
_FORMAT = 1


@dataclass
class Checkpoint:
    """The state of a training run after ``steps`` completed steps.

    ``epoch``/``position``: where in the epoch order the next batch starts (``position`` equal to
    the order's length: the epoch's batches are done; its carried chains may still be draining).
    ``carried``: ``(item id, offset)`` of each chain carried into the next step, run on
    ``carried_snapshot`` in epoch ``carried_epoch``. ``files``: the byte lengths of the run
    directory's append-only files at this point.
    """

    steps: int
    epoch: int
    position: int
    playbook: Playbook
    best: Playbook
    best_accuracy: float | None = None
    final_eval: EvalResult | None = None
    sim_total: float = 0.0
    wall_total: float = 0.0
    gpu_total: float = 0.0
    calls: int = 0
    tokens: int = 0
    samples: int = 0
    rollouts: int = 0
    counts: CallCounts = field(default_factory=CallCounts)
    val_counts: CallCounts = field(default_factory=CallCounts)
    watch: Any = None
    plan_state: Any = None
    carried: tuple[tuple[str, float], ...] = ()
    carried_snapshot: Playbook | None = None
    carried_epoch: int = 0
    files: dict[str, int] = field(default_factory=dict)
    format: int = _FORMAT


def save_checkpoint(root: Path, checkpoint: Checkpoint) -> None:
    """Write ``checkpoint`` atomically into the run directory ``root``."""
    write_atomic(root / CHECKPOINT_FILE, pickle.dumps(checkpoint, protocol=pickle.HIGHEST_PROTOCOL))


def load_checkpoint(root: str | Path) -> Checkpoint:
    """The checkpoint of the run in ``root``; :class:`ConfigError` in one line when there is none
    or it is unreadable."""
    path = Path(root) / CHECKPOINT_FILE
    try:
        checkpoint = pickle.loads(path.read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"{root}: no {CHECKPOINT_FILE}; not a resumable run directory") from None
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError) as exc:
        raise ConfigError(f"{path}: unreadable checkpoint: {exc}") from None
    if not isinstance(checkpoint, Checkpoint) or checkpoint.format != _FORMAT:
        raise ConfigError(f"{path}: not a checkpoint of this version of combee")
    return checkpoint
