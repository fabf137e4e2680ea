"""A run directory: everything needed to audit or resume a learning run. :class:`RunDir` is the
only writer and reader of these files:

    config.json          the run's configuration
    splits.json          the manifest (content hash) of every split used
    ledger.jsonl         one row per step: time, calls, tokens per role, rollouts, GPU-seconds,
                         accuracy, the artifact's version and size
    controller.jsonl     batch-size decisions with their inputs and reasons (auto batch size only)
    deltas.jsonl         every apply that changed the artifact, replayable (ACE: playbook/deltalog.py)
    errors.jsonl         every failed or unusable call, and every failed agent episode, as it happened
    trajectories.jsonl   every finished agent episode, as it finished: a line of the ``traces``
                         task's format with the whole trajectory; on a resume only a line cut by
                         the kill is dropped (a resumed run reuses those finished since its
                         checkpoint's previous one)
    playbooks/v*.json    every playbook version (ACE); candidates/c*.json every candidate and
                         pool/v*.json the best one of each pool version (GEPA); prompts/v*.json
                         every prompt variable (TextGrad): a learner's version files, each
                         ``<folder>/<letter><5+ digits>.json`` (:data:`VERSION_FILE`)
    final.json, best.json  the last and the best artifact, in the form users deploy
    summary.json         totals, accounting and how the run ended
    calls.json           calls per role, trimmed calls, failures (over every process of the run)
    capabilities.json    what each endpoint was found to do; sampling.json what each role sends
    batching.json        the start-up probe's batching curve of the rollout role's endpoint (auto
                         batch size only; a resumed run reads it instead of probing again)
    checkpoint.bin       the state after the last completed step, to resume from (record/checkpoint.py)
    card.toml            the experiment card the run was made under (``learn --card``), if any
    server.log, local_server.json   the local server's log and command (``--local``)
    report.md            the run's one page: result with its 95% interval, cost, what was learned,
                         the learning curve (curve.png) and provenance (readout/report.py)
    prompt.txt           the learned context, rendered as an agent reads it: what to paste
    provenance.json      version, git commit, host, command line, start and end time, seed, splits
    eval.json, results.jsonl   an evaluation's score with its interval, and each example's result
                         (``combee eval``: input, answer, target, score, feedback)
    predictions.jsonl    each validation's per-example input, answer, target, score and feedback,
                         with the step it came after
    replies.jsonl        every model call's reply (cut to 16,000 characters), its role, its step,
                         up to :data:`REPLIES_KEPT_BYTES` (then one closing line, and no more)

A run is written first into a hidden staging folder beside its directory
(``.<name>.starting-*``). :meth:`RunDir.start`, called once the run has started (configuration,
data and endpoints validated, ``config.json`` written), moves it into place; a run that fails
before :meth:`RunDir.start` leaves nothing behind (:meth:`RunDir.close` removes the staging folder
and any parent folder it had to create). Files get mode :data:`~combee_fast.files.FILE_MODE`,
folders :data:`~combee_fast.files.DIR_MODE`.

Replacing a previous run (``overwrite``) waits until the new run has proved itself: it keeps
running in its staging folder until :meth:`RunDir.replace_previous` (the loop calls it after the
first step with most of its calls succeeding, or at a clean end). The replacement is a
journaled swap (:mod:`combee_fast.record.swap`): a kill at any point of it leaves a state that the
next command on that directory finishes, saying so. A new run that ends before that (it failed or
was stopped) leaves the previous run as it was and is kept beside it, as
``<name>.unswapped-<date-time>`` (:attr:`RunDir.location`).

A run directory is held by one process at a time: an exclusive lock on its ``.lock`` file, taken
when it is created or reopened (and, when it replaces a run, on the previous run's too) and
released at :meth:`RunDir.close`.

Every write that fails (a full disk, a file made read-only) raises
:class:`~combee_fast.errors.StorageError` naming the file; a checkpoint only ever replaces the
previous one whole, and a resume cuts the append-only files back to the checkpoint's marks
(``trajectories.jsonl`` is only checked against its mark: what a killed step finished is kept).
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import msgspec

from combee_fast.config import HISTORY_KEPT, SessionConfig, config_to_dict, load_config
from combee_fast.endpoint.batching import BatchingCurve
from combee_fast.errors import CheckpointError, ConfigError, SplitChangedError, StorageError
from combee_fast.files import DIR_MODE, open_append, open_regular, read_regular, write_atomic
from combee_fast.protocols.learning import CompleteKind, Deployable
from combee_fast.record.checkpoint import (CHECKPOINT_FILE, LEGACY_CHECKPOINT_FILE, FileMark, Header, StoredCheckpoint,
                                           read_checkpoint, save_checkpoint)
from combee_fast.record.ledger import LedgerRow
from combee_fast.record.provenance import Provenance
from combee_fast.record.state import TrainState
from combee_fast.record.swap import recover, swap_in, take_lock, unswapped_name
from combee_fast.schema import Trajectory
from combee_fast.tasks.base import SplitManifest

_encoder = msgspec.json.Encoder(order="deterministic")


CURVE_FILE = "curve.png"
"""The learning curve beside ``report.md``."""
_RUN_FILES = ("config.json", "splits.json", "ledger.jsonl", "controller.jsonl", "deltas.jsonl", "errors.jsonl",
              "final.json", "best.json", "summary.json", "card.toml", CHECKPOINT_FILE, LEGACY_CHECKPOINT_FILE,
              "calls.json", "capabilities.json", "batching.json", "sampling.json", "server.log", "local_server.json", "report.md",
              "prompt.txt", "provenance.json", CURVE_FILE, "eval.json", "results.jsonl", "trajectories.jsonl",
              "replies.jsonl", "predictions.jsonl")
_APPENDED = ("ledger.jsonl", "controller.jsonl", "deltas.jsonl", "errors.jsonl", "replies.jsonl", "predictions.jsonl")
_TRAJECTORIES = "trajectories.jsonl"  # appended, marked, never cut back to its mark (see reopen)
_NO_FILE = FileMark(0, hashlib.sha256().hexdigest())
_MARKED = ("config.json", "splits.json")  # besides the appended files: what a resume must find unchanged
_READ_BYTES = 1 << 20
REPLIES_KEPT_BYTES = 64 << 20
"""Bytes of replies ``replies.jsonl`` keeps (64 MiB): the line that reaches it is followed by one
closing line, and the run's later replies are not written (its calls are still counted)."""
VERSION_FOLDER = re.compile(r"[a-z][a-z_]*")
VERSION_FILE = re.compile(r"[a-z]\d{5,}\.json")
"""A learner's version file is ``<folder>/<file>`` directly in the run directory, the folder
named by :data:`VERSION_FOLDER` and the file by this (``playbooks/v00001.json``): the run
directory knows version folders by this shape, not by learner."""


def _is_version_folder(entry: Path) -> bool:
    """True when ``entry`` is a folder of a learner's version files (:data:`VERSION_FILE`)."""
    return (VERSION_FOLDER.fullmatch(entry.name) is not None and entry.is_dir()
            and any(VERSION_FILE.fullmatch(file.name) for file in entry.iterdir()))


def _version_folders(path: Path) -> list[str]:
    """The folders of ``path`` that hold a learner's version files."""
    if not path.is_dir():
        return []
    return [entry.name for entry in path.iterdir() if _is_version_folder(entry)]


def check_run_target(root: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """``root`` as a path, if a run can be written there; else :class:`ConfigError` in one line.

    A replacement of the run in ``root`` that a kill left half done is finished first (said on
    stderr). Refused: a path naming an existing file, a folder that already holds a run (unless
    ``overwrite``), and a place this process cannot write (a read-only folder, or one under a file).
    Nothing is left behind (writability is probed with an empty folder, removed at once).
    """
    path = Path(root)
    refuse_link(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"run directory {path} exists and is not a folder; choose another --out")
    if path.parent.is_dir():
        _recover(path)
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
        summary = msgspec.json.decode(read_regular(path / "summary.json"))
    except (OSError, msgspec.DecodeError):
        return None
    failed = summary.get("failed") if isinstance(summary, dict) else None
    if not isinstance(failed, str):
        return None
    text = " ".join(failed.split())
    return text if len(text) <= 120 else text[:117] + "..."


def _holds_a_run(path: Path) -> bool:
    return path.is_dir() and (any((path / name).exists() for name in _RUN_FILES) or bool(_version_folders(path)))


def _is_run_entry(entry: Path) -> bool:
    """A file or folder a run writes (the rest of a run directory, a user's notes, is kept)."""
    return entry.name in _RUN_FILES or _is_version_folder(entry)


def refuse_link(path: Path) -> None:
    """ConfigError when ``path`` is a symbolic link: a run folder is replaced and recovered by
    renaming, which would move the link and not the folder it names, and leave the place wedged."""
    if path.is_symlink():
        raise ConfigError(f"run directory {path} is a symbolic link (to {os.readlink(path)}); give the folder itself "
                          "as --out")


def _recover(path: Path) -> None:
    try:
        recover(path, _is_run_entry)
    except OSError as exc:
        raise StorageError(f"run directory {path}: cannot finish the replacement a stopped process left: "
                           f"{exc.strerror or exc}") from None


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """An ``OSError`` while writing ``path`` (as the run directory names it, even while the run is
    staged) as one :class:`StorageError` naming it."""
    try:
        yield
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _hash_on(digest: Any, file: IO[bytes], count: int) -> None:
    """Feed ``digest`` the next ``count`` bytes of ``file``, a bounded chunk at a time."""
    while count:
        chunk = file.read(min(count, _READ_BYTES))
        if not chunk:
            raise OSError(f"{file.name}: ended {count} bytes early")
        digest.update(chunk)
        count -= len(chunk)


class _Appended:
    """One append-only file of the run, with the SHA-256 of everything it holds, kept as it grows;
    ``shown`` is its path in messages (in the run directory, wherever it is staged)."""

    def __init__(self, path: Path, shown: Path, digest: Any = None) -> None:
        self.path = shown
        self.file: IO[bytes] = open_append(path)
        self.digest = digest or hashlib.sha256()
        self.size = os.fstat(self.file.fileno()).st_size
        """Bytes the file holds."""

    def write(self, data: bytes) -> None:
        with _writing(self.path):
            self.file.write(data)
            self.file.flush()
        self.digest.update(data)
        self.size += len(data)

    def mark(self) -> FileMark:
        with _writing(self.path):
            self.file.flush()
        return FileMark(os.fstat(self.file.fileno()).st_size, self.digest.hexdigest())

    def close(self) -> None:
        with contextlib.suppress(OSError):  # a full disk: what was flushed is what the checkpoint marked
            self.file.close()


class RunDir:
    """Writes and reads one run's files; see the module docstring for staging, :meth:`start`,
    the replacement of a previous run, modes and the lock.

    A folder that already holds a run is refused (:class:`ConfigError` naming it) unless
    ``overwrite``; it is then replaced by the new run at :meth:`replace_previous`, never earlier:
    two runs never mix in one ledger, and a run that fails leaves the old one intact.
    Until the run is in place, :attr:`root` is the staging folder.
    """

    def __init__(self, root: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        self.target = check_run_target(root, overwrite=overwrite)
        self._created: list[Path] = []  # parent folders made for the staging folder, outermost last
        parent = self.target.parent
        while not parent.exists():
            self._created.append(parent)
            parent = parent.parent
        self._started = False
        self._in_place = False
        self._locks: list[int] = []
        self._files: dict[str, _Appended] = {}
        self._trajectories_mark = _NO_FILE  # trajectories.jsonl at the last checkpoint
        self._resume_from = 0  # where a resumed run's reused trajectories start in it
        self.resumed: StoredCheckpoint | None = None
        """The verified checkpoint of a reopened run (:meth:`reopen`); None for a new run."""
        try:
            if _holds_a_run(self.target):  # a resume of it must not run while it is being replaced
                self._locks.append(take_lock(self.target, self.target))
            for folder in reversed(self._created):
                folder.mkdir()
                os.chmod(folder, DIR_MODE)
            self.root = Path(tempfile.mkdtemp(dir=self.target.parent, prefix=f".{self.target.name}.starting-"))
            os.chmod(self.root, DIR_MODE)
            self._locks.append(take_lock(self.root, self.target))
            self._open_appended({})
        except OSError as exc:
            self.close()
            raise StorageError(f"run directory {self.target}: cannot create it: {exc.strerror or exc}") from None
        except BaseException:
            self.close()
            raise

    @classmethod
    def reopen(cls, root: str | os.PathLike[str]) -> RunDir:
        """The started run in ``root``, to resume it: locked, its checkpoint verified into
        :attr:`resumed`, ``config.json``, ``splits.json`` and each append-only file checked
        against the checkpoint's marks, the latter cut back to their marked lengths (lines of a
        step that never completed are dropped), then opened for appends. :class:`ConfigError` in
        one line when ``root`` holds no resumable run, another process holds it, or a file was
        changed or cut since the checkpoint (:class:`~combee_fast.errors.CheckpointError`).
        ``trajectories.jsonl`` is checked against its mark but keeps the episodes finished after
        it, all but a line the kill cut (:meth:`resumed_trajectories` reads them)."""
        refuse_link(Path(root))
        self = cls.__new__(cls)
        self.target = self.root = Path(root)
        self._created = []
        self._started = self._in_place = True
        self._locks = []
        self._files = {}
        self._trajectories_mark, self._resume_from = _NO_FILE, 0
        if self.root.parent.is_dir():
            _recover(self.root)
        if not (self.root / "config.json").is_file():
            raise ConfigError(f"{root}: no config.json; not a run directory")
        try:
            self._locks.append(take_lock(self.root, self.target))
            stored = read_checkpoint(self.root)
            for name in _MARKED:
                self._check_whole(name, stored)
            self._open_appended(stored.header.files, stored)
        except OSError as exc:
            self.close()
            raise StorageError(f"run directory {self.root}: cannot reopen it: {exc.strerror or exc}") from None
        except BaseException:
            self.close()
            raise
        self.resumed = stored
        return self

    def _open_appended(self, marks: dict[str, FileMark], stored: StoredCheckpoint | None = None) -> None:
        """Open each append-only file; with ``marks``, each is verified first (all of them, before
        any is cut back to its mark)."""
        digests = {name: self._verified_prefix(self.root / name, marks[name], stored)
                   for name in (*_APPENDED, _TRAJECTORIES) if name in marks}
        for name in _APPENDED:
            path = self.root / name
            if name in marks and path.stat().st_size > marks[name].length:
                os.truncate(path, marks[name].length)
            self._files[name] = _Appended(path, self.target / name, digests.get(name))
        if stored is not None:
            self._reopen_trajectories(stored, digests.get(_TRAJECTORIES))

    def _reopen_trajectories(self, stored: StoredCheckpoint, digest: Any) -> None:
        """Keep the lines of ``trajectories.jsonl`` after its mark (its marked part verified into
        ``digest``), all but a last one left incomplete, and open it for appends with its SHA-256
        carried on over them."""
        header, path = stored.header, self.root / _TRAJECTORIES
        self._trajectories_mark = header.files.get(_TRAJECTORIES, _NO_FILE)
        self._resume_from = header.previous.get(_TRAJECTORIES, _NO_FILE).length
        if not path.exists():
            return
        digest = digest or hashlib.sha256()
        complete = self._trajectories_mark.length
        with open_regular(path) as file:
            file.seek(complete)
            while chunk := file.read(_READ_BYTES):
                newline = chunk.rfind(b"\n")
                if newline >= 0:
                    complete = file.tell() - len(chunk) + newline + 1
            file.seek(self._trajectories_mark.length)
            _hash_on(digest, file, complete - self._trajectories_mark.length)
        if path.stat().st_size > complete:
            os.truncate(path, complete)
        self._files[_TRAJECTORIES] = _Appended(path, self.target / _TRAJECTORIES, digest)

    def _check_whole(self, name: str, stored: StoredCheckpoint) -> None:
        """``name`` must be as the checkpoint marked it."""
        mark, path = stored.header.files.get(name), self.root / name
        if mark is None:
            return
        try:
            data = read_regular(path)
        except FileNotFoundError:
            raise CheckpointError(f"{path} is missing; the checkpoint of step {stored.steps} recorded it") from None
        if FileMark(len(data), hashlib.sha256(data).hexdigest()) != mark:
            raise CheckpointError(f"{path} changed since the checkpoint of step {stored.steps} (a resumed run keeps "
                                  "its configuration, seed and splits); refusing to resume")

    def _verified_prefix(self, path: Path, mark: FileMark, stored: StoredCheckpoint | None) -> Any:
        """The running SHA-256 of ``path``'s first ``mark.length`` bytes; :class:`CheckpointError`
        when it is shorter or those bytes changed."""
        steps = stored.steps if stored is not None else "?"
        size = path.stat().st_size if path.exists() else 0
        if size < mark.length:
            raise CheckpointError(f"{path} is {size} bytes, shorter than the {mark.length} the checkpoint of step {steps} "
                                  "recorded: it was cut; refusing to resume")
        digest = hashlib.sha256()
        with open_regular(path) as file:
            _hash_on(digest, file, mark.length)
        if digest.hexdigest() != mark.sha256:
            raise CheckpointError(f"{path} changed since the checkpoint of step {steps} (its first {mark.length} bytes "
                                  "differ); refusing to resume")
        return digest

    # -------------------------------------------------------------------- lifecycle

    @property
    def started(self) -> bool:
        return self._started

    @property
    def replacing(self) -> bool:
        """Started in its staging folder, waiting to replace a previous run (:meth:`replace_previous`)."""
        return self._started and not self._in_place

    @property
    def location(self) -> Path:
        """Where the run's files are once it is closed: the run directory, or (a run that never
        replaced the previous one) the folder it is kept in beside it."""
        return self.root if self._in_place or not self._started else self._aside()

    def start(self) -> None:
        """The run has started (idempotent): a new run directory is moved into place now; one
        replacing a previous run stays staged until :meth:`replace_previous`."""
        if self._started:
            return
        self._started = True
        if not _holds_a_run(self.target):
            self._move_in()

    def replace_previous(self) -> None:
        """Swap the staged run in for the previous one (journaled; idempotent)."""
        if self.replacing:
            self._move_in()

    def _move_in(self) -> None:
        staging, target = self.root, self.target
        with _writing(target):
            if not target.exists():
                os.rename(staging, target)
            else:
                swap_in(staging, target, _is_run_entry)
        self.root, self._in_place = target, True

    def _aside(self) -> Path:
        if not hasattr(self, "_aside_path"):
            self._aside_path = unswapped_name(self.target)
        return self._aside_path

    def close(self) -> None:
        """Close the files and release the locks. A run that never started is removed; one that
        started but never replaced the previous run is moved to :attr:`location`."""
        for file in self._files.values():
            file.close()
        self._files = {}
        if not self._started:
            self._discard()
        elif not self._in_place:
            with _writing(self.target):
                os.rename(self.root, self._aside())
            self.root, self._in_place = self._aside(), True
        for fd in self._locks:
            os.close(fd)
        self._locks = []

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

    def write_batching(self, curve: BatchingCurve) -> None:
        self._write_json("batching.json", curve)

    def read_batching(self) -> BatchingCurve | None:
        """The batching curve the run recorded (None: it recorded none); :class:`CheckpointError`
        naming the file when it cannot be read."""
        path = self.root / "batching.json"
        if not path.exists():
            return None
        try:
            return msgspec.json.decode(read_regular(path), type=BatchingCurve)
        except (OSError, msgspec.MsgspecError) as exc:
            raise CheckpointError(f"{path}: not a batching curve: {exc}") from None

    def write_sampling(self, sampling: dict[str, Any]) -> None:
        self._write_json("sampling.json", sampling)

    def write_calls(self, calls: dict[str, Any]) -> None:
        self._write_json("calls.json", calls)

    def write_summary(self, summary: dict[str, Any]) -> None:
        self._write_json("summary.json", summary)

    def write_report(self, text: str, curve: bytes | None = None) -> None:
        """``report.md``, the run's page, and its learning curve (``curve.png``) when it has one."""
        if curve is not None:
            with _writing(self.target / CURVE_FILE):
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
        with _writing(self.target / "results.jsonl"):
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
        with _writing(self.target / name):
            deployable.save(self.root / name)

    def save_version(self, files: Iterable[tuple[str, bytes]]) -> None:
        """A new version's files (``playbooks/v*.json``, ``candidates/c*.json``...: :data:`VERSION_FILE`)."""
        for name, data in files:
            path = self.root / name
            if (path.parent.parent != self.root or not VERSION_FOLDER.fullmatch(path.parent.name)
                    or not VERSION_FILE.fullmatch(path.name)):
                raise ValueError(f"not a version file of a run: {name!r}")
            with _writing(self.target / name):
                if not path.parent.is_dir():
                    path.parent.mkdir()
                    os.chmod(path.parent, DIR_MODE)
                write_atomic(path, data)

    def save_checkpoint(self, state: TrainState[Any], kind: CompleteKind[Any, Any], *, method: str, seed: int) -> None:
        """``checkpoint.bin``: ``state`` of ``kind``'s ``method`` under ``seed``, with the marks
        of the run's files at this point (and, as ``previous``, ``trajectories.jsonl``'s mark at
        the checkpoint before: where a resume from this one reads finished trajectories from)."""
        marks = self.file_marks()
        previous = {_TRAJECTORIES: self._trajectories_mark} if _TRAJECTORIES in marks else {}
        header = Header(kind.name, method, seed, state.steps, marks, previous)
        with _writing(self.target / CHECKPOINT_FILE):
            save_checkpoint(self.root, state, header, kind)
        self._trajectories_mark = marks.get(_TRAJECTORIES, _NO_FILE)

    def append_trajectory(self, record: Any) -> None:
        """One finished agent episode, as a line of ``trajectories.jsonl`` (written at once; the
        file is created by the first)."""
        if _TRAJECTORIES not in self._files:
            with _writing(self.target / _TRAJECTORIES):
                self._files[_TRAJECTORIES] = _Appended(self.root / _TRAJECTORIES, self.target / _TRAJECTORIES)
        self._append(_TRAJECTORIES, record)

    def resumed_trajectories(self) -> list[Trajectory]:
        """The trajectories a reopened run finished since its checkpoint's previous one, read a
        line at a time (a line that does not decode, or holds no episode, is passed over)."""
        path = self.root / _TRAJECTORIES
        if self.resumed is None or not path.exists():
            return []
        decoder = msgspec.json.Decoder(_StoredEpisode)
        found = []
        with open_regular(path) as lines:
            lines.seek(self._resume_from)
            for line in lines:
                try:
                    episode = decoder.decode(line).episode
                except msgspec.DecodeError:
                    continue
                if episode is not None:
                    found.append(episode)
        return found

    def append_ledger(self, row: LedgerRow) -> None:
        self._append("ledger.jsonl", row)

    def read_ledger(self) -> collections.deque[LedgerRow]:
        """The latest :data:`~combee_fast.config.HISTORY_KEPT` rows of ``ledger.jsonl``, read a line at a time."""
        rows: collections.deque[LedgerRow] = collections.deque(maxlen=HISTORY_KEPT)
        path = self.root / "ledger.jsonl"
        if path.exists():
            decoder = msgspec.json.Decoder(LedgerRow)
            with open_regular(path) as lines:
                for number, line in enumerate(lines, start=1):
                    if not line.strip():
                        continue
                    try:
                        rows.append(decoder.decode(line))
                    except msgspec.MsgspecError as exc:
                        raise CheckpointError(f"{path}:{number}: not a ledger row: {exc}") from None
        return rows

    def append_decision(self, row: Any) -> None:
        self._append("controller.jsonl", row)

    def append_error(self, record: Any) -> None:
        """One failed or unusable call, as a line of ``errors.jsonl`` (written at once)."""
        self._append("errors.jsonl", record)

    def append_reply(self, record: dict[str, Any]) -> bool:
        """One model call's reply (``record``, with its ``step``), as a line of ``replies.jsonl``
        (written at once) while the file holds less than :data:`REPLIES_KEPT_BYTES`; the line that
        reaches the bound is followed by a closing line saying so. True when this line reached it."""
        replies = self._files["replies.jsonl"]
        if replies.size >= REPLIES_KEPT_BYTES:
            return False
        self._append("replies.jsonl", record)
        if replies.size < REPLIES_KEPT_BYTES:
            return False
        self._append("replies.jsonl", {"step": record.get("step"), "bound": REPLIES_KEPT_BYTES,
                                       "closed": "replies.jsonl reached its bound: later replies are not kept"})
        return True

    def append_predictions(self, step: int, predictions: Iterable[Any]) -> None:
        """One validation's per-example predictions, after ``step`` steps, as lines of
        ``predictions.jsonl``."""
        self._files["predictions.jsonl"].write(b"".join(
            _encoder.encode({"step": step, **msgspec.structs.asdict(p)}) + b"\n" for p in predictions))

    def append_episode_failure(self, record: Any) -> None:
        """One failed agent episode, as a line of ``errors.jsonl`` (written at once)."""
        self._append("errors.jsonl", record)

    def append_deltas(self, entries: Iterable[Any]) -> None:
        self._files["deltas.jsonl"].write(b"".join(_encoder.encode(entry) + b"\n" for entry in entries))

    def file_marks(self) -> dict[str, FileMark]:
        """The length and SHA-256 of ``config.json``, ``splits.json`` and each append-only file
        (all written lines flushed; ``trajectories.jsonl`` once it exists)."""
        marks = {name: file.mark() for name, file in self._files.items()}
        for name in _MARKED:
            with contextlib.suppress(FileNotFoundError):
                data = (self.root / name).read_bytes()
                marks[name] = FileMark(len(data), hashlib.sha256(data).hexdigest())
        return marks

    # ----------------------------------------------------------------------- helpers

    def _write_json(self, name: str, value: Any) -> None:
        with _writing(self.target / name):
            write_atomic(self.root / name, msgspec.json.format(_encoder.encode(value), indent=2))

    def _write_text(self, name: str, text: str) -> None:
        with _writing(self.target / name):
            write_atomic(self.root / name, text.encode())

    def _append(self, name: str, row: Any) -> None:
        self._files[name].write(_encoder.encode(row) + b"\n")


class _StoredEpisode(msgspec.Struct):
    """The part of a ``trajectories.jsonl`` line a resume reads."""

    episode: Trajectory | None = None


def read_split_manifests(path: str | os.PathLike[str], *, what: str | None = None) -> list[SplitManifest]:
    """The split manifests a run recorded in ``path`` (a ``splits.json``, ``what`` it is for);
    :class:`SplitChangedError` naming the file when it cannot be read."""
    try:
        return msgspec.json.decode(read_regular(path), type=list[SplitManifest])
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
            value = msgspec.json.decode(read_regular(path / name))
        except (OSError, msgspec.DecodeError):
            return None
        return value if isinstance(value, dict) else None

    try:
        prompt: str | None = read_regular(path / "prompt.txt").decode("utf-8")
    except (OSError, UnicodeDecodeError):
        prompt = None
    return RunRecord(str(path), table("config.json"), table("summary.json"), table("eval.json"),
                     table("provenance.json"), prompt)
