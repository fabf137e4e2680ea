"""The serial-baseline cells of a card, cached on disk: verifying a second configuration against
the same card reruns no sequential ACE.

A cached cell is one JSON file (a :class:`~combee_fast.verify.cells.CellRun`) in the cache
folder, named by the hardware class, the seed and a hash of everything its result depends on:
the baseline's whole run configuration (task, splits, seed, preset or endpoints, time scale,
world variant), the card's serial-baseline table and budget, and the pinned hashes of the
card's splits. A changed card or split is a different file, never a stale hit.
"""

from __future__ import annotations

import hashlib
from typing import Any
from pathlib import Path

import msgspec

from combee_fast.config import SessionConfig, config_to_dict
from combee_fast.files import write_atomic
from combee_fast.verify.card import Card, HardwareClass
from combee_fast.verify.cells import CellRun, baseline_config, run_cell


def baseline_key(card: Card, config: SessionConfig) -> str:
    """The content hash (16 hex digits) naming the cached baseline run of ``config`` under ``card``."""
    parts = {
        "config": config_to_dict(config),
        "serial_baseline": msgspec.to_builtins(card.serial_baseline),
        "budget": msgspec.to_builtins(card.budget),
        "splits": [(split.name, split.role, split.sha256) for split in card.eval_set.splits],
    }
    return hashlib.sha256(msgspec.json.encode(parts, order="deterministic")).hexdigest()[:16]


def cache_file(folder: str | Path, card: Card, hardware: HardwareClass, config: SessionConfig) -> Path:
    """Where the baseline cell of ``config`` on ``hardware`` is cached."""
    return Path(folder) / f"{card.name}-{hardware.name}-seed{config.seed}-{baseline_key(card, config)}.json"


async def baseline_cell(card: Card, card_path: str | Path, hardware: HardwareClass, seed: int, *,
                        folder: str | Path, time_scale: float, world: str | None = None,
                        learner: str | None = None, learners: dict[str, Any] | None = None) -> tuple[CellRun, bool]:
    """The serial baseline's cell (``seed``, ``hardware``; the card's method on ``learner``) and
    whether it came from the cache.

    A miss runs the baseline (:func:`~combee_fast.verify.cells.run_cell`, recorded in the
    card's usage record) and stores it; a hit reads the file and runs nothing.
    """
    config = baseline_config(card, hardware, seed, time_scale=time_scale, learner=learner, learners=learners,
                             **({} if world is None else {"world": world}))
    path = cache_file(folder, card, hardware, config)
    if path.exists():
        try:
            return msgspec.json.decode(path.read_bytes(), type=CellRun), True
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass  # a damaged cache file is rerun and replaced
    cell = await run_cell(card, card_path, config, hardware, command="verify-baseline")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, msgspec.json.format(msgspec.json.encode(cell), indent=2))
    return cell, False
