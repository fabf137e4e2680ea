"""Typed snapshots of an object's working state, so a checkpoint keeps it as declared types.

A snapshot type is a :class:`msgspec.Struct` whose field names are the owner's attribute names
(private ones included). :func:`capture` reads them (a ``deque`` or ``list`` as a tuple);
:func:`restore_into` writes them back into an owner built from the same configuration, each
``deque`` or ``list`` attribute staying one (with its ``maxlen``). Attributes derived from the
configuration are not snapshotted: the owner rebuilds them.

"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection
from typing import Any, TypeVar

import msgspec

S = TypeVar("S", bound=msgspec.Struct)


def capture(owner: object, kind: type[S], **given: Any) -> S:
    """A ``kind`` holding ``owner``'s attributes of its field names (or the values ``given``)."""
    values = {}
    for name in kind.__struct_fields__:
        value = given[name] if name in given else getattr(owner, name)
        values[name] = tuple(value) if isinstance(value, (deque, list)) else value
    return kind(**values)


def restore_into(owner: object, state: msgspec.Struct, *, skip: Collection[str] = ()) -> None:
    """Set ``owner``'s attributes from ``state``'s fields (but ``skip``)."""
    for name in state.__struct_fields__:
        if name in skip:
            continue
        value, current = getattr(state, name), getattr(owner, name)
        if isinstance(current, deque):
            value = deque(value, maxlen=current.maxlen)
        elif isinstance(current, list):
            value = list(value)
        setattr(owner, name, value)


class StructArtifact:
    """``encode_artifact``/``decode_artifact`` of an object whose ``artifact_type`` is a
    :class:`msgspec.Struct` (or any type msgspec encodes): MessagePack."""

    artifact_type: Any

    def encode_artifact(self, artifact: Any) -> bytes:
        return msgspec.msgpack.encode(artifact)

    def decode_artifact(self, data: bytes) -> Any:
        return msgspec.msgpack.decode(data, type=self.artifact_type)
