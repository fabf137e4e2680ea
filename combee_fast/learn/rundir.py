"""A run directory: everything needed to audit or resume a learning run.

    config.json        the run's configuration
    splits.json        the manifest (content hash) of every split used
    ledger.jsonl       one row per step: time, calls, tokens per role, accuracy, playbook size
    controller.jsonl   batch-size decisions with their inputs and reasons (auto batch size only)
    deltas.jsonl       every apply that changed the playbook, replayable (learn/deltalog.py)
    playbooks/v*.json  every playbook version
    final.json, best.json, summary.json
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from combee_fast.playbook import Playbook

_encoder = msgspec.json.Encoder(order="deterministic")


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class RunDir:
    """Writes one run's files under ``root`` (created if missing)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        (self.root / "playbooks").mkdir(parents=True, exist_ok=True)
        self._ledger = open(self.root / "ledger.jsonl", "ab")
        self._decisions = open(self.root / "controller.jsonl", "ab")
        self._deltas = open(self.root / "deltas.jsonl", "ab")

    def write_json(self, name: str, value: Any) -> None:
        _write_atomic(self.root / name, msgspec.json.format(_encoder.encode(value), indent=2))

    def append_ledger(self, row: Any) -> None:
        self._ledger.write(_encoder.encode(row) + b"\n")
        self._ledger.flush()

    def append_decision(self, row: Any) -> None:
        self._decisions.write(_encoder.encode(row) + b"\n")
        self._decisions.flush()

    def append_deltas(self, entries: Any) -> None:
        self._deltas.writelines(_encoder.encode(entry) + b"\n" for entry in entries)
        self._deltas.flush()

    def save_version(self, playbook: Playbook) -> None:
        playbook.save(self.root / "playbooks" / f"v{playbook.version:05d}.json")

    def save_playbook(self, name: str, playbook: Playbook) -> None:
        playbook.save(self.root / name)

    def close(self) -> None:
        self._ledger.close()
        self._decisions.close()
        self._deltas.close()
