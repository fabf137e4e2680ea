"""The checkpoint of a training run: its :class:`~combee_fast.record.state.TrainState`, written
atomically after every completed step, so the run can go on after the process stopped
(``kill -9``, SIGINT, SIGTERM).

A resumed run continues from the last completed step and ends with the same final artifact as an
uninterrupted run with the same seed: the epoch order is drawn again from the seed tree and the
state holds the position in it; the batch plan's state (the controller's fit), best-so-far and
every running total are restored; work the method carried past the step (ACE's chains still
retrying, :mod:`combee_fast.combee.map`) is run again from its items against the snapshot it ran
on (requests are seeded by path, so they make the same calls and get the same answers from a
deterministic endpoint or the replay cache).

The file (``checkpoint.bin``) cannot lie and cannot run code:

    magic (8 bytes) | format (4, big-endian) | payload length (8) | SHA-256 of the payload (32) | payload

The payload is msgpack, decoded into declared types only (:class:`Checkpoint`): the artifacts
through their learner's codec (:meth:`~combee_fast.protocols.CompleteKind.encode_artifact`), the
batch plan's state as :attr:`~combee_fast.protocols.BatchPlan.state_type`, the carried work as
:meth:`~combee_fast.protocols.Method.carried_type`. A file of another format, cut, or with one
byte changed is refused (:class:`~combee_fast.errors.CheckpointError`, one line); a pickle left
by an older version (``checkpoint.pkl``) is never loaded.

The :class:`Header` records which learner, method and seed made the state and a :class:`FileMark`
(length and SHA-256) of ``config.json``, ``splits.json`` and each append-only file
(``ledger.jsonl``, ``controller.jsonl``, ``deltas.jsonl``, ``errors.jsonl``, and
``trajectories.jsonl`` with its mark at the checkpoint before as well) at that point. Those
files may hold lines of a step that did not complete; reopening the run directory
(:meth:`~combee_fast.record.rundir.RunDir.reopen`) cuts them back to their marked lengths (all but
``trajectories.jsonl``, whose finished episodes a resume reuses), and refuses a file that is
shorter than its mark or whose marked part changed.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec

from combee_fast.errors import CheckpointError
from combee_fast.files import read_regular, write_atomic
from combee_fast.methods.base import EvalResult
from combee_fast.protocols.learning import CompleteKind
from combee_fast.record.bounds import Count, Fraction, NonNegative, Seconds
from combee_fast.record.concurrency import ConcurrencyTotal
from combee_fast.record.ledger import CallCounts
from combee_fast.record.state import CallsRecord, TrainState

P = TypeVar("P")
C = TypeVar("C")

CHECKPOINT_FILE = "checkpoint.bin"
LEGACY_CHECKPOINT_FILE = "checkpoint.pkl"
"""What older versions wrote (a pickle): recognised, never loaded."""

CHECKPOINT_FORMAT = 3
"""Version of the file layout and of :class:`Checkpoint`; a checkpoint of another is refused."""

_MAGIC = b"COMBEE\x00C"
_HEAD = struct.Struct(">8sIQ32s")


class FileMark(msgspec.Struct, frozen=True):
    """A run file as the checkpoint saw it: its byte length and the SHA-256 of those bytes."""

    length: Count
    sha256: str


class Header(msgspec.Struct, frozen=True):
    """What a checkpoint is of: the learner, method and seed of the run, the steps completed and
    the marks of the run's files at that point; ``previous``: the marks, at the checkpoint before
    this one, of the files a resume reads from there (``trajectories.jsonl``)."""

    learner: str
    method: str
    seed: int
    steps: Count
    files: dict[str, FileMark]
    previous: dict[str, FileMark] = msgspec.field(default_factory=dict)


class Kept(msgspec.Struct, Generic[P, C], frozen=True):
    """The fields of :class:`~combee_fast.record.state.TrainState` a checkpoint keeps (the same
    names), the artifacts in their learner's encoding, typed on the plan's state ``P`` and the
    carried work ``C``. Decoding checks ranges (:mod:`combee_fast.record.bounds`), nested counts
    included: counts and positions 0 to ``MAX_COUNT``, seconds 0 to ``MAX_SECONDS`` (no infinity),
    the best score a fraction."""

    artifact: bytes
    best: bytes
    steps: Count
    epoch: Count
    position: Count
    best_score: Fraction | None
    final_eval: EvalResult | None
    stale_validations: Count
    sim_seconds: Seconds
    wall_seconds: Seconds
    gpu_seconds: Seconds
    calls: Count
    tokens: Count
    samples: Count
    rollouts: Count
    counts: CallCounts
    val_counts: CallCounts
    plan_state: P
    carried: C
    calls_record: CallsRecord
    episodes: Count = 0
    episodes_failed: Count = 0
    env_seconds: Seconds = 0.0
    explored: Count = 0
    accepted: Count = 0
    dollars: dict[str, NonNegative | None] = msgspec.field(default_factory=dict)
    concurrency: dict[str, ConcurrencyTotal] = msgspec.field(default_factory=dict)


class Checkpoint(msgspec.Struct, Generic[P, C], frozen=True):
    header: Header
    state: Kept[P, C]


class _HeaderOnly(msgspec.Struct):
    header: Header  # the state is skipped unread


def encode_checkpoint(state: TrainState[Any], header: Header, kind: CompleteKind[Any, Any]) -> bytes:
    """The checkpoint file's bytes for ``state`` (artifacts through ``kind``'s codec)."""
    kept = {name: getattr(state, name) for name in Kept.__struct_fields__}
    kept.update(artifact=kind.encode_artifact(state.artifact), best=kind.encode_artifact(state.best))
    encoder = msgspec.msgpack.Encoder(enc_hook=_artifact_encoder(kind))
    payload = encoder.encode(Checkpoint(header, Kept(**kept)))
    return _HEAD.pack(_MAGIC, CHECKPOINT_FORMAT, len(payload), hashlib.sha256(payload).digest()) + payload


def save_checkpoint(root: Path, state: TrainState[Any], header: Header, kind: CompleteKind[Any, Any]) -> None:
    """Write ``state`` atomically into the run directory ``root``."""
    write_atomic(root / CHECKPOINT_FILE, encode_checkpoint(state, header, kind))


class StoredCheckpoint:
    """A checkpoint read and verified (magic, format, length, checksum, header); its state is
    decoded by :meth:`state` once the learner, plan and method that will continue it are known."""

    def __init__(self, path: Path, header: Header, payload: bytes) -> None:
        self.path = path
        self.header = header
        self._payload = payload

    @property
    def steps(self) -> int:
        return self.header.steps

    def state(self, kind: CompleteKind[Any, Any], *, method: str, plan_state_type: Any,
              carried_type: Any) -> TrainState[Any]:
        """The checkpointed state, decoded as ``kind``'s artifacts, a plan state of
        ``plan_state_type`` and carried work of ``carried_type``; :class:`CheckpointError` in one
        line when the checkpoint is of another learner or method, or does not decode as those."""
        header = self.header
        if (header.learner, header.method) != (kind.name, method):
            raise CheckpointError(f"{self.path}: a checkpoint of learner {header.learner!r} method {header.method!r}, "
                                  f"not of {kind.name!r} {method!r}")
        decoder = msgspec.msgpack.Decoder(Checkpoint[plan_state_type, carried_type],
                                          dec_hook=_artifact_decoder(kind))
        try:
            kept = decoder.decode(self._payload).state
            fields = {name: getattr(kept, name) for name in Kept.__struct_fields__}
            fields.update(artifact=kind.decode_artifact(kept.artifact), best=kind.decode_artifact(kept.best))
        except (msgspec.MsgspecError, ValueError, TypeError) as exc:
            raise CheckpointError(f"{self.path}: its state does not decode for this run: {_one_line(exc)}") from None
        return TrainState(**fields)


def read_checkpoint(root: str | Path) -> StoredCheckpoint:
    """The verified checkpoint of the run in ``root``; :class:`CheckpointError` in one line when
    there is none, it is a pickle of an older version, or it is cut, corrupt or of another format."""
    path = Path(root) / CHECKPOINT_FILE
    try:
        data = read_regular(path)
    except FileNotFoundError:
        if (Path(root) / LEGACY_CHECKPOINT_FILE).exists():
            raise CheckpointError(f"{root}: its checkpoint is a {LEGACY_CHECKPOINT_FILE} of an older combee (a pickle, "
                                  "which could run code); not loaded: start the run again") from None
        raise CheckpointError(f"{root}: no {CHECKPOINT_FILE}; not a resumable run directory") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if len(data) < _HEAD.size:
        raise CheckpointError(f"{path}: cut short ({len(data)} bytes); not a checkpoint")
    magic, version, length, digest = _HEAD.unpack_from(data)
    if magic != _MAGIC:
        raise CheckpointError(f"{path}: not a combee checkpoint")
    if version != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: a checkpoint of format {version}; this version of combee reads format "
                              f"{CHECKPOINT_FORMAT}")
    payload = data[_HEAD.size:]
    if len(payload) != length:
        raise CheckpointError(f"{path}: {len(payload)} payload bytes where its header says {length}; cut or padded")
    if hashlib.sha256(payload).digest() != digest:
        raise CheckpointError(f"{path}: its checksum does not match its contents; the file is corrupt")
    try:
        header = msgspec.msgpack.decode(payload, type=_HeaderOnly).header
    except msgspec.MsgspecError as exc:  # only a file written by a broken encoder gets here
        raise CheckpointError(f"{path}: its header does not decode: {_one_line(exc)}") from None
    return StoredCheckpoint(path, header, payload)


def _artifact_encoder(kind: CompleteKind[Any, Any]) -> Callable[[Any], Any]:
    def encode(value: Any) -> Any:
        if isinstance(value, kind.artifact_type):
            return kind.encode_artifact(value)
        raise TypeError(f"a checkpoint cannot hold a {type(value).__name__}")

    return encode


def _artifact_decoder(kind: CompleteKind[Any, Any]) -> Callable[[type, Any], Any]:
    def decode(expected: type, value: Any) -> Any:
        if expected is kind.artifact_type and isinstance(value, bytes):
            return kind.decode_artifact(value)
        raise TypeError(f"expected {expected.__name__}")

    return decode


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
