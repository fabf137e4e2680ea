"""Writes the terminal task's split files from the families: ``python -m
combee_fast.tasks.terminal.generate [FOLDER]`` (default: the package's ``tasks/data``).

Each family has :data:`INSTANCES` instances, drawn from seeded parameters: the first
:data:`TRAIN` go to ``train``, the next :data:`SELECTION` to ``selection``, the rest to ``test``.
Rows are in family order within a split. Running it again writes the same bytes (the splits are
pinned by their hashes in :mod:`combee_fast.tasks.terminal.task`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

from combee_fast.tasks.ace_format import DATA_DIR
from combee_fast.tasks.terminal.chores import Chore
from combee_fast.tasks.terminal.families import FAMILIES, make_chore
from combee_fast.tasks.terminal.task import SPLIT_FILES

INSTANCES = 16
TRAIN = 10
SELECTION = 2


def split_of(index: int) -> str:
    return "train" if index < TRAIN else "selection" if index < TRAIN + SELECTION else "test"


def chores_by_split() -> dict[str, list[Chore]]:
    splits: dict[str, list[Chore]] = {name: [] for name in SPLIT_FILES}
    for family in FAMILIES:
        for index in range(INSTANCES):
            splits[split_of(index)].append(make_chore(family, index))
    return splits


def write_splits(folder: Path) -> None:
    encoder = msgspec.json.Encoder()
    for name, chores in chores_by_split().items():
        (folder / SPLIT_FILES[name]).write_bytes(b"".join(encoder.encode(chore) + b"\n" for chore in chores))


if __name__ == "__main__":
    write_splits(Path(sys.argv[1]) if len(sys.argv) > 1 else DATA_DIR)
