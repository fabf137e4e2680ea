"""A run directory: everything needed to audit or resume a learning run. :class:`RunDir` is the
only writer and reader of these files:

    config.json          the run's configuration
    splits.json          the manifest (content hash) of every split used
    ledger.jsonl         one row per step: time, calls, tokens per role, rollouts, GPU-seconds,
                         accuracy, the artifact's version and size
    controller.jsonl     batch-size decisions with their inputs and reasons (auto batch size only)
    deltas.jsonl         every apply that changed the artifact, replayable (ACE: playbook/deltalog.py)
    errors.jsonl         every failed or unusable call, as it happened
    playbooks/v*.json    every playbook version (ACE); candidates/c*.json every candidate and
                         pool/v*.json the best one of each pool version (GEPA); prompts/v*.json
                         every prompt variable (TextGrad): a learner's version files, each
                         ``<folder>/<letter><5+ digits>.json`` (:data:`VERSION_FILE`)
    final.json, best.json  the last and the best artifact, in the form users deploy
    summary.json         totals, accounting and how the run ended
    calls.json           calls per role, trimmed calls, failures
    capabilities.json    what each endpoint was found to do; sampling.json what each role sends
    checkpoint.pkl       the state after the last completed step, to resume from (run/checkpoint.py)
    card.toml            the experiment card the run was made under (``learn --card``), if any
    server.log, local_server.json   the local server's log and command (``--local``)
    report.md            the run's one page: result with its 95% interval, cost, what was learned,
                         the learning curve (curve.png) and provenance (run/report.py)
    prompt.txt           the learned context, rendered as an agent reads it: what to paste
    provenance.json      version, git commit, host, command line, start and end time, seed, splits
    eval.json, results.jsonl   an evaluation's score with its interval, and each example's result
                         (``combee eval``)

A run is written first into a hidden staging folder beside its directory
(``.<name>.starting-*``). :meth:`RunDir.start`, called once the run has started (configuration,
data and endpoints validated, ``config.json`` written), moves it into place, replacing a previous
run only then (``overwrite``); a run that fails before :meth:`RunDir.start` leaves nothing behind
(:meth:`RunDir.close` removes the staging folder and any parent folder it had to create). Files
get mode :data:`~combee_fast.files.FILE_MODE`, folders :data:`~combee_fast.files.DIR_MODE`.

A run directory is held by one process at a time: an exclusive lock on its ``.lock`` file, taken
when it is created or reopened and released at :meth:`RunDir.close`.
"""

from __future__ import annotations

import collections
import fcntl
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import msgspec

from combee_fast.config import HISTORY_KEPT, SessionConfig, config_to_dict, load_config
from combee_fast.errors import ConfigError, SplitChangedError
from combee_fast.files import DIR_MODE, FILE_MODE, open_append, write_atomic
from combee_fast.protocols import Deployable
from combee_fast.run.checkpoint import CHECKPOINT_FILE, load_checkpoint, save_checkpoint
from combee_fast.run.ledger import LedgerRow
from combee_fast.run.provenance import Provenance
from combee_fast.run.state import TrainState
from combee_fast.tasks.base import SplitManifest

_encoder = msgspec.json.Encoder(order="deterministic")


CURVE_FILE = "curve.png"
"""The learning curve beside ``report.md``."""
_RUN_FILES = ("config.json", "splits.json", "ledger.jsonl", "controller.jsonl", "deltas.jsonl", "errors.jsonl",
              "final.json", "best.json", "summary.json", "card.toml", CHECKPOINT_FILE, "calls.json",
              "capabilities.json", "sampling.json", "server.log", "local_server.json", "report.md", "prompt.txt",
              "provenance.json", CURVE_FILE, "eval.json", "results.jsonl")
_LOCK_FILE = ".lock"
_APPENDED = {"_ledger": "ledger.jsonl", "_decisions": "controller.jsonl", "_deltas": "deltas.jsonl",
             "_errors": "errors.jsonl"}
VERSION_FOLDER = re.compile(r"[a-z][a-z_]*")
VERSION_FILE = re.compile(r"[a-z]\d{5,}\.json")
"""A learner's version file is ``<folder>/<file>`` directly in the run directory, the folder
named by :data:`VERSION_FOLDER` and the file by this (``playbooks/v00001.json``): the run
directory knows version folders by this shape, not by learner."""


def _version_folders(path: Path) -> list[str]:
    """The folders of ``path`` that hold a learner's version files."""
    if not path.is_dir():
        return []
    return [entry.name for entry in path.iterdir() if entry.is_dir() and VERSION_FOLDER.fullmatch(entry.name)
            and any(VERSION_FILE.fullmatch(file.name) for file in entry.iterdir())]


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
        failed = _failure_of(path)
        if failed is not None:
            raise ConfigError(f"run directory {path} holds a run that failed ({failed}); pass --overwrite to replace "
                              "it (its errors.jsonl and report.md go with it) or choose another --out")
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


def _failure_of(path: Path) -> str | None:
    """Why the run in ``path`` failed, cut short, as its ``summary.json`` says (None: it did not)."""
    try:
        summary = msgspec.json.decode((path / "summary.json").read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    failed = summary.get("failed") if isinstance(summary, dict) else None
    if not isinstance(failed, str):
        return None
    text = " ".join(failed.split())
    return text if len(text) <= 120 else text[:117] + "..."


def _holds_a_run(path: Path) -> bool:
    return path.is_dir() and (any((path / name).exists() for name in _RUN_FILES) or bool(_version_folders(path)))


class RunDir:
    """Writes and reads one run's files; see the module docstring for staging, :meth:`start`,
    modes and the lock.

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
        self._lock: int | None = None
        self.resumed: TrainState[Any] | None = None
        """The checkpointed state of a reopened run (:meth:`reopen`); None for a new run."""
        try:
            for folder in reversed(self._created):
                folder.mkdir()
                os.chmod(folder, DIR_MODE)
            self.root = Path(tempfile.mkdtemp(dir=self.target.parent, prefix=f".{self.target.name}.starting-"))
            os.chmod(self.root, DIR_MODE)
            self._take_lock()
            for attribute, name in _APPENDED.items():
                setattr(self, attribute, open_append(self.root / name))
        except OSError as exc:
            self._discard()
            raise ConfigError(f"run directory {self.target}: cannot create it: {exc.strerror or exc}") from None

    @classmethod
    def reopen(cls, root: str | os.PathLike[str]) -> RunDir:
        """The started run in ``root``, to resume it: locked, its checkpoint read into
        :attr:`resumed` (with its latest ledger rows), each append-only file cut back to its
        length at the checkpoint (lines of a step that never completed are dropped), then opened
        for appends. :class:`ConfigError` in one line when ``root`` holds no resumable run or
        another process holds it."""
        self = cls.__new__(cls)
        self.target = self.root = Path(root)
        self._created = []
        self._started = True
        self._lock = None
        if not (self.root / "config.json").is_file():
            raise ConfigError(f"{root}: no config.json; not a run directory")
        try:
            self._take_lock()
            state = load_checkpoint(self.root)
            for attribute, name in _APPENDED.items():
                path = self.root / name
                length = state.files.get(name, 0)
                if path.exists() and path.stat().st_size > length:
                    os.truncate(path, length)
                setattr(self, attribute, open_append(path))
        except OSError as exc:
            self.close()
            raise ConfigError(f"run directory {self.root}: cannot reopen it: {exc.strerror or exc}") from None
        except BaseException:
            self.close()
            raise
        state.ledger.extend(self.read_ledger())
        self.resumed = state
        return self

    def _take_lock(self) -> None:
        """Hold the run's lock (:class:`ConfigError` when another process holds it)."""
        fd = os.open(self.root / _LOCK_FILE, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(f"run directory {self.target} is in use by another combee process") from None
        self._lock = fd

    # -------------------------------------------------------------------- lifecycle

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
            for name in (*_RUN_FILES, *_version_folders(target)):
                if (target / name).exists():
                    os.replace(target / name, trash / name)
            for entry in staging.iterdir():
                os.replace(entry, target / entry.name)
            staging.rmdir()
            shutil.rmtree(trash, ignore_errors=True)
        self.root = target
        self._started = True

    def close(self) -> None:
        """Close the files and release the lock; a run that never started is removed (the
        previous run stays)."""
        for name in _APPENDED:
            file = getattr(self, name, None)
            if file is not None:
                file.close()
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
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

    # -------------------------------------------------------------- what a run is

    def write_config(self, config: SessionConfig) -> None:
        """``config.json``: the configuration, URLs without credentials."""
        self._write_json("config.json", config_to_dict(config, public=True))

    def read_config(self) -> SessionConfig:
        return load_config(self.root / "config.json")

    def write_splits(self, manifests: Iterable[SplitManifest]) -> None:
        self._write_json("splits.json", list(manifests))

    def read_splits(self) -> list[SplitManifest]:
        """The recorded split manifests; :class:`SplitChangedError` when the file is unreadable."""
        return read_split_manifests(self.root / "splits.json")

    def write_card(self, text: str) -> None:
        self._write_text("card.toml", text)

    def card_file(self) -> Path | None:
        """The copy of the card the run was made under, or None."""
        path = self.root / "card.toml"
        return path if path.is_file() else None

    def write_capabilities(self, endpoints: list[dict[str, Any]]) -> None:
        self._write_json("capabilities.json", endpoints)

    def write_sampling(self, sampling: dict[str, Any]) -> None:
        self._write_json("sampling.json", sampling)

    def write_calls(self, calls: dict[str, Any]) -> None:
        self._write_json("calls.json", calls)

    def write_summary(self, summary: dict[str, Any]) -> None:
        self._write_json("summary.json", summary)

    def write_report(self, text: str, curve: bytes | None = None) -> None:
        """``report.md``, the run's page, and its learning curve (``curve.png``) when it has one."""
        if curve is not None:
            write_atomic(self.root / CURVE_FILE, curve)
        self._write_text("report.md", text)

    def write_prompt(self, text: str) -> None:
        """``prompt.txt``: the learned context as an agent reads it."""
        self._write_text("prompt.txt", text if text.endswith("\n") else text + "\n")

    def write_provenance(self, record: Provenance) -> None:
        self._write_json("provenance.json", record)

    def write_eval(self, report: dict[str, Any], results: Iterable[Any]) -> None:
        """An evaluation's ``eval.json`` (its score, interval, counts) and ``results.jsonl`` (one
        line per example)."""
        write_atomic(self.root / "results.jsonl", b"".join(_encoder.encode(row) + b"\n" for row in results))
        self._write_json("eval.json", report)

    def keep_server_log(self, log: str, facts: dict[str, Any]) -> None:
        """The local server's log (``server.log``) and what it was (``local_server.json``)."""
        self._write_text("server.log", log)
        self._write_json("local_server.json", facts)

    # --------------------------------------------------------------- what it learned

    def save_artifact(self, name: str, deployable: Deployable) -> None:
        """``final.json`` or ``best.json``: an artifact in the form users deploy."""
        if name not in ("final.json", "best.json"):
            raise ValueError(f"not an artifact file of a run: {name!r}")
        deployable.save(self.root / name)

    def save_version(self, files: Iterable[tuple[str, bytes]]) -> None:
        """A new version's files (``playbooks/v*.json``, ``candidates/c*.json``...: :data:`VERSION_FILE`)."""
        for name, data in files:
            path = self.root / name
            if (path.parent.parent != self.root or not VERSION_FOLDER.fullmatch(path.parent.name)
                    or not VERSION_FILE.fullmatch(path.name)):
                raise ValueError(f"not a version file of a run: {name!r}")
            if not path.parent.is_dir():
                path.parent.mkdir()
                os.chmod(path.parent, DIR_MODE)
            write_atomic(path, data)

    def save_checkpoint(self, state: TrainState[Any]) -> None:
        """``checkpoint.pkl``: ``state``, with the append-only files' lengths at this point."""
        state.files = self.file_lengths()
        save_checkpoint(self.root, state)

    def append_ledger(self, row: LedgerRow) -> None:
        self._append(self._ledger, row)

    def read_ledger(self) -> collections.deque[LedgerRow]:
        """The latest :data:`~combee_fast.config.HISTORY_KEPT` rows of ``ledger.jsonl``, read a line at a time."""
        rows: collections.deque[LedgerRow] = collections.deque(maxlen=HISTORY_KEPT)
        path = self.root / "ledger.jsonl"
        if path.exists():
            decoder = msgspec.json.Decoder(LedgerRow)
            with path.open("rb") as lines:
                rows.extend(decoder.decode(line) for line in lines if line.strip())
        return rows

    def append_decision(self, row: Any) -> None:
        self._append(self._decisions, row)

    def append_error(self, record: Any) -> None:
        """One failed or unusable call, as a line of ``errors.jsonl`` (written at once)."""
        self._append(self._errors, record)

    def append_deltas(self, entries: Iterable[Any]) -> None:
        self._deltas.writelines(_encoder.encode(entry) + b"\n" for entry in entries)
        self._deltas.flush()

    def file_lengths(self) -> dict[str, int]:
        """The byte length of each append-only file (all written lines flushed)."""
        lengths = {}
        for attribute, name in _APPENDED.items():
            file = getattr(self, attribute)
            file.flush()
            lengths[name] = os.fstat(file.fileno()).st_size
        return lengths

    # ----------------------------------------------------------------------- helpers

    def _write_json(self, name: str, value: Any) -> None:
        write_atomic(self.root / name, msgspec.json.format(_encoder.encode(value), indent=2))

    def _write_text(self, name: str, text: str) -> None:
        write_atomic(self.root / name, text.encode())

    @staticmethod
    def _append(file: IO[bytes], row: Any) -> None:
        file.write(_encoder.encode(row) + b"\n")
        file.flush()


def read_split_manifests(path: str | os.PathLike[str], *, what: str | None = None) -> list[SplitManifest]:
    """The split manifests a run recorded in ``path`` (a ``splits.json``, ``what`` it is for);
    :class:`SplitChangedError` naming the file when it cannot be read."""
    try:
        return msgspec.json.decode(Path(path).read_bytes(), type=list[SplitManifest])
    except (OSError, msgspec.MsgspecError) as exc:
        if what is None:
            raise SplitChangedError(f"{path} is unreadable: {exc}") from None
        raise SplitChangedError(f"{path} ({what}) is unreadable: {exc}; move it away to go on without the check") from None


class RunRecord(msgspec.Struct, frozen=True):
    """What ``combee show`` and ``combee compare`` read of a finished run (None: the file is
    missing or unreadable)."""

    root: str
    config: dict[str, Any] | None
    summary: dict[str, Any] | None
    evaluation: dict[str, Any] | None
    provenance: dict[str, Any] | None
    prompt: str | None


def read_run(root: str | os.PathLike[str]) -> RunRecord:
    """The files of the run (or evaluation) in ``root`` that describe it; :class:`ConfigError`
    in one line when ``root`` is not a run directory."""
    path = Path(root)
    if not path.is_dir() or not _holds_a_run(path):
        raise ConfigError(f"{root}: not a run directory (no config.json, summary.json or report.md)")

    def table(name: str) -> dict[str, Any] | None:
        try:
            value = msgspec.json.decode((path / name).read_bytes())
        except (OSError, msgspec.DecodeError):
            return None
        return value if isinstance(value, dict) else None

    try:
        prompt: str | None = (path / "prompt.txt").read_text(encoding="utf-8")
    except OSError:
        prompt = None
    return RunRecord(str(path), table("config.json"), table("summary.json"), table("eval.json"),
                     table("provenance.json"), prompt)
