"""A run directory: everything needed to audit or resume a learning run.

    config.json        the run's configuration
    splits.json        the manifest (content hash) of every split used
    ledger.jsonl       one row per step: time, calls, tokens per role, rollouts, GPU-seconds, accuracy,
                       playbook size
    controller.jsonl   batch-size decisions with their inputs and reasons (auto batch size only)
    deltas.jsonl       every apply that changed the playbook, replayable (playbook/deltalog.py)
    playbooks/v*.json  every playbook version
    candidates/c*.json every candidate of a GEPA run's pool
    final.json, best.json, summary.json
    card.toml          the experiment card the run was made under (``learn --card``), if any
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from combee_fast.errors import ConfigError
from combee_fast.files import write_atomic
from combee_fast.playbook import Playbook

_encoder = msgspec.json.Encoder(order="deterministic")


_RUN_FILES = ("config.json", "splits.json", "ledger.jsonl", "controller.jsonl", "deltas.jsonl",
              "final.json", "best.json", "summary.json", "card.toml")


class RunDir:
    """Writes one run's files under ``root`` (created if missing).

    A folder that already holds a run is refused (:class:`ConfigError` naming it) unless
    ``overwrite``, which deletes that run's files first: two runs never mix in one ledger.
    """

    def __init__(self, root: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        self.root = Path(root)
        previous = [self.root / name for name in _RUN_FILES if (self.root / name).exists()]
        previous += sorted((self.root / "playbooks").glob("v*.json"))
        previous += sorted((self.root / "candidates").glob("c*.json"))  # a GEPA run's pool
        if previous and not overwrite:
            raise ConfigError(f"run directory {self.root} already holds a run; choose another --out or pass --overwrite")
        for path in previous:
            path.unlink()
        (self.root / "playbooks").mkdir(parents=True, exist_ok=True)
        self._ledger = open(self.root / "ledger.jsonl", "ab")
        self._decisions = open(self.root / "controller.jsonl", "ab")
        self._deltas = open(self.root / "deltas.jsonl", "ab")

    def write_json(self, name: str, value: Any) -> None:
        write_atomic(self.root / name, msgspec.json.format(_encoder.encode(value), indent=2))

    def write_text(self, name: str, text: str) -> None:
        write_atomic(self.root / name, text.encode())

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
