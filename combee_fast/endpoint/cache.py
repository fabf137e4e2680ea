"""Record/replay cache of chat results in one append-only JSONL file.

Each line is a :class:`CacheRecord`: the request key and the :class:`ChatResult` as returned.
The key is a SHA-256 over the canonical JSON of (role, model, messages, max_tokens,
temperature, seed, json_schema, schema_name): everything that can change an answer, including
the role, which the simulated task world answers by. Later lines win, so re-recording a key
appends instead of rewriting.

Modes: ``off`` (no file), ``record`` (call each distinct request once and append its result;
the file's earlier lines are not read), ``replay`` (never call; a miss is a ``replay_miss``
error), ``record-missing`` (replay hits, call and append misses). In every mode but ``off`` a
request repeated within a run is answered with the result recorded for it (the client also
makes identical requests in flight at once wait for the first), so a recorded run and its
replay see the same answers even from an endpoint whose answers or latencies vary between
identical calls (one whose latency follows its load). Results of transport failures (timeout,
connection, HTTP status) are not recorded, so a repeat or a later ``record-missing`` run retries
them; content failures (malformed, truncated, schema mismatch) are.
"""

from __future__ import annotations

import enum
import hashlib
import os
from pathlib import Path
from typing import IO, Any

import msgspec

from combee_fast.endpoint.calls import ChatRequest, ChatResult
from combee_fast.errors import ReplayCacheError
from combee_fast.files import open_regular
from combee_fast.schema import SCHEMA_VERSION, CallError

TRANSPORT_ERRORS = frozenset({"timeout", "connection", "http_status", "cancelled", "replay_miss"})


class CacheMode(enum.Enum):
    OFF = "off"
    RECORD = "record"
    REPLAY = "replay"
    RECORD_MISSING = "record-missing"


class CacheRecord(msgspec.Struct, frozen=True):
    key: str
    result: ChatResult
    schema_version: int = SCHEMA_VERSION


_key_encoder = msgspec.json.Encoder(order="sorted")
_record_encoder = msgspec.json.Encoder()
_record_decoder = msgspec.json.Decoder(CacheRecord)


def request_key(model: str, request: ChatRequest) -> str:
    """Stable hex key of everything in ``request`` (and ``model``) that can change the answer."""
    identity: tuple[Any, ...] = (
        request.role, model, [(m.role, m.content) for m in request.messages], request.max_tokens,
        request.temperature, request.seed, request.json_schema, request.schema_name)
    if request.extra_body:  # only when set, so keys recorded before it existed still match
        identity += (request.extra_body,)
    if request.tools or any(m.tool_calls or m.tool_call_id is not None for m in request.messages):
        identity += (request.tools, request.tool_choice,
                     [(m.tool_call_id, [(c.name, c.arguments) for c in m.tool_calls]) for m in request.messages])
    canonical = _key_encoder.encode(identity)
    return hashlib.sha256(canonical).hexdigest()


class ReplayCache:
    """Results by request key, loaded from and appended to ``path`` (created if missing).

    A folder, an unreadable or unwritable path raises :class:`ReplayCacheError` naming it."""

    def __init__(self, path: str | os.PathLike[str], mode: CacheMode) -> None:
        self.path = Path(path)
        self.mode = mode
        self._results: dict[str, ChatResult] = {}
        self._file: IO[bytes] | None = None
        if self.path.is_dir():
            raise ReplayCacheError(f"{self.path}: the cache must be a file, this is a folder")
        try:
            if mode in (CacheMode.REPLAY, CacheMode.RECORD_MISSING):
                self._load()
            if mode in (CacheMode.RECORD, CacheMode.RECORD_MISSING):
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("ab")
        except OSError as exc:
            raise ReplayCacheError(f"{self.path}: cannot open the cache file: {exc.strerror or exc}") from None

    def __len__(self) -> int:
        return len(self._results)

    def _load(self) -> None:
        if not self.path.exists():
            if self.mode is CacheMode.REPLAY:
                raise ReplayCacheError(f"{self.path}: replay cache file does not exist")
            return
        try:
            lines = open_regular(self.path)
        except OSError as exc:
            raise ReplayCacheError(f"{self.path}: cannot read the cache file: {exc.strerror or exc}") from None
        with lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    record = _record_decoder.decode(line)
                except msgspec.MsgspecError as exc:
                    raise ReplayCacheError(f"{self.path}:{number}: bad cache record: {exc}") from None
                if record.schema_version != SCHEMA_VERSION:
                    raise ReplayCacheError(
                        f"{self.path}:{number}: record has schema_version {record.schema_version}, "
                        f"this build reads {SCHEMA_VERSION}"
                    )
                self._results[record.key] = record.result

    def get(self, key: str) -> ChatResult | None:
        """The result held for ``key`` (loaded from the file, or recorded by this run) marked
        ``usage.cached``; ``None`` on a miss."""
        result = self._results.get(key)
        if result is None:
            return None
        return msgspec.structs.replace(result, usage=msgspec.structs.replace(result.usage, cached=True))

    def results(self) -> list[CacheRecord]:
        """Every result held now, as records (what another process's view of this cache starts from)."""
        return [CacheRecord(key, result) for key, result in self._results.items()]

    def miss(self, key: str) -> CallError:
        """The error a replay-only cache returns for a key it does not hold."""
        return CallError(kind="replay_miss", message=f"{self.path}: no recorded result for request {key[:16]}")

    def put(self, key: str, result: ChatResult) -> None:
        """Append ``result`` (unless it is a transport failure) and flush it to the file."""
        if self._file is None:
            raise ReplayCacheError(f"{self.path}: cache opened in mode {self.mode.value!r} cannot record")
        if result.error is not None and result.error.kind in TRANSPORT_ERRORS:
            return
        self._results[key] = result
        self._file.write(_record_encoder.encode(CacheRecord(key=key, result=result)) + b"\n")
        self._file.flush()

    @property
    def records(self) -> bool:
        """Whether new results are written (modes record and record-missing)."""
        return self._file is not None

    @property
    def replays(self) -> bool:
        """Whether recorded results are answered (modes replay and record-missing)."""
        return self.mode in (CacheMode.REPLAY, CacheMode.RECORD_MISSING)

    def close(self) -> None:
        """Flush and close the file; idempotent."""
        if self._file is not None:
            self._file.close()
            self._file = None
