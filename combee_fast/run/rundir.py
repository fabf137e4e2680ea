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
    checkpoint.pkl     the state after the last completed step, to resume from (run/checkpoint.py)
    card.toml          the experiment card the run was made under (``learn --card``), if any

A run is written first into a hidden staging folder beside its directory
(``.<name>.starting-*``). :meth:`RunDir.start`, called once the run has started (configuration,
data and endpoints validated, ``config.json`` written), moves it into place, replacing a previous
run only then (``overwrite``); a run that fails before :meth:`RunDir.start` leaves nothing behind
(:meth:`RunDir.close` removes the staging folder and any parent folder it had to create). Files
get mode :data:`~combee_fast.files.FILE_MODE`, folders :data:`~combee_fast.files.DIR_MODE`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any

import msgspec

from combee_fast.errors import ConfigError
from combee_fast.files import DIR_MODE, open_append, write_atomic
from combee_fast.playbook import Playbook

_encoder = msgspec.json.Encoder(order="deterministic")


_RUN_FILES = ("config.json", "splits.json", "ledger.jsonl", "controller.jsonl", "deltas.jsonl", "errors.jsonl",
              "final.json", "best.json", "summary.json", "card.toml", "checkpoint.pkl")
_APPENDED = {"_ledger": "ledger.jsonl", "_decisions": "controller.jsonl", "_deltas": "deltas.jsonl",
             "_errors": "errors.jsonl"}
_RUN_FOLDERS = {"playbooks": "v*.json", "candidates": "c*.json"}  # a GEPA run's pool in candidates/


def check_run_target(root: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """``root`` as a path, if a run can be written there; else :class:`ConfigError` in one line.

    Refused: a path naming an existing file, a folder that already holds a run (unless
    ``overwrite``), and a place this process cannot write (a read-only folder, or one under a file).
    Nothing is left behind (writability is probed with an empty folder, removed at once).
    """
    path = Path(root)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"run directory {path} exists and is not a folder; choose another --out")
    if _holds_a_run(path) and not overwrite:
        raise ConfigError(f"run directory {path} already holds a run; choose another --out or pass --overwrite")
    existing = path.parent  # the staging folder is created there (after its missing parents)
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"run directory {path}: {existing} is not a folder")
    for folder in (existing, *([path] if path.is_dir() else [])):
        try:  # a real probe: permissions, read-only file systems and root's special folders alike
            os.rmdir(tempfile.mkdtemp(dir=folder, prefix=".combee-write-check-"))
        except OSError as exc:
            raise ConfigError(f"run directory {path}: cannot write in {folder} ({exc.strerror or exc})") from None
    return path


def _holds_a_run(path: Path) -> bool:
    return path.is_dir() and (any((path / name).exists() for name in _RUN_FILES)
                              or any(any((path / folder).glob(pattern)) for folder, pattern in _RUN_FOLDERS.items()))


class RunDir:
    """Writes one run's files; see the module docstring for staging, :meth:`start` and modes.

    A folder that already holds a run is refused (:class:`ConfigError` naming it) unless
    ``overwrite``; its files are then replaced by the new run's at :meth:`start`, never earlier:
    two runs never mix in one ledger, and a run that fails to start leaves the old one intact.
    Until :meth:`start`, :attr:`root` is the staging folder.
    """

    def __init__(self, root: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        self.target = check_run_target(root, overwrite=overwrite)
        self._created: list[Path] = []  # parent folders made for the staging folder, outermost last
        parent = self.target.parent
        while not parent.exists():
            self._created.append(parent)
            parent = parent.parent
        self._started = False
        try:
            for folder in reversed(self._created):
                folder.mkdir()
                os.chmod(folder, DIR_MODE)
            self.root = Path(tempfile.mkdtemp(dir=self.target.parent, prefix=f".{self.target.name}.starting-"))
            os.chmod(self.root, DIR_MODE)
            (self.root / "playbooks").mkdir()
            os.chmod(self.root / "playbooks", DIR_MODE)
            for attribute, name in _APPENDED.items():
                setattr(self, attribute, open_append(self.root / name))
        except OSError as exc:
            self._discard()
            raise ConfigError(f"run directory {self.target}: cannot create it: {exc.strerror or exc}") from None

    @classmethod
    def reopen(cls, root: str | os.PathLike[str], files: dict[str, int]) -> RunDir:
        """The started run in ``root``, to resume it: each append-only file is cut back to its
        length in ``files`` (lines of a step that never completed are dropped), then opened for
        appends. :class:`ConfigError` in one line when ``root`` holds no run."""
        self = cls.__new__(cls)
        self.target = self.root = Path(root)
        self._created = []
        self._started = True
        if not _holds_a_run(self.root):
            raise ConfigError(f"run directory {self.root} holds no run to resume")
        try:
            (self.root / "playbooks").mkdir(mode=DIR_MODE, exist_ok=True)
            for attribute, name in _APPENDED.items():
                path = self.root / name
                length = files.get(name, 0)
                if path.exists() and path.stat().st_size > length:
                    os.truncate(path, length)
                setattr(self, attribute, open_append(path))
        except OSError as exc:
            raise ConfigError(f"run directory {self.root}: cannot reopen it: {exc.strerror or exc}") from None
        return self

    def file_lengths(self) -> dict[str, int]:
        """The byte length of each append-only file (all written lines flushed)."""
        lengths = {}
        for attribute, name in _APPENDED.items():
            file = getattr(self, attribute)
            file.flush()
            lengths[name] = os.fstat(file.fileno()).st_size
        return lengths

    def write_bytes(self, name: str, data: bytes) -> None:
        write_atomic(self.root / name, data)

    @property
    def started(self) -> bool:
        return self._started

    def start(self) -> None:
        """Move the staged run into place (idempotent): the folder is renamed to the run
        directory, or, when that folder exists, the previous run's files are replaced by the
        new run's (other files in it are kept)."""
        if self._started:
            return
        staging, target = self.root, self.target
        if not target.exists():
            os.rename(staging, target)
        else:
            trash = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.replaced-"))
            for name in (*_RUN_FILES, *_RUN_FOLDERS):
                if (target / name).exists():
                    os.replace(target / name, trash / name)
            for entry in staging.iterdir():
                os.replace(entry, target / entry.name)
            staging.rmdir()
            shutil.rmtree(trash, ignore_errors=True)
        self.root = target
        self._started = True

    def write_json(self, name: str, value: Any) -> None:
        write_atomic(self.root / name, msgspec.json.format(_encoder.encode(value), indent=2))

    def write_text(self, name: str, text: str) -> None:
        write_atomic(self.root / name, text.encode())

    def append_ledger(self, row: Any) -> None:
        self._append(self._ledger, row)

    def append_decision(self, row: Any) -> None:
        self._append(self._decisions, row)

    def append_error(self, record: Any) -> None:
        """One failed or unusable call, as a line of ``errors.jsonl`` (written at once)."""
        self._append(self._errors, record)

    def append_deltas(self, entries: Any) -> None:
        self._deltas.writelines(_encoder.encode(entry) + b"\n" for entry in entries)
        self._deltas.flush()

    @staticmethod
    def _append(file: IO[bytes], row: Any) -> None:
        file.write(_encoder.encode(row) + b"\n")
        file.flush()

    def save_version(self, playbook: Playbook) -> None:
        playbook.save(self.root / "playbooks" / f"v{playbook.version:05d}.json")

    def save_playbook(self, name: str, playbook: Playbook) -> None:
        playbook.save(self.root / name)

    def close(self) -> None:
        """Close the files; a run that never started is removed (the previous run stays)."""
        for name in _APPENDED:
            file = getattr(self, name, None)
            if file is not None:
                file.close()
        if not self._started:
            self._discard()

    def _discard(self) -> None:
        root = getattr(self, "root", None)
        if root is not None and root != self.target:
            shutil.rmtree(root, ignore_errors=True)
        for folder in self._created:  # innermost first
            try:
                folder.rmdir()
            except OSError:
                break
