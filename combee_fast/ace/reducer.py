"""Reducer: merges k curator proposals made against the same base playbook into one set of ops.

User message tags (each on its own line, content between): ``<playbook>``, ``<proposals>`` (one
JSON object per line: ``{"proposal": i, "operations": [...]}``, ``i`` counting from 1, each
operation in the curator's format plus a ``ref`` such as ``"P2.3"``: proposal 2, operation 3).

The reply keeps proposed operations *by reference* and writes out only what it changes:
``{"reasoning": str, "keep": ["P1.1", ...], "operations": [...]}``. Kept operations are applied
verbatim, so a specific lesson survives the merge word for word, and the reducer decodes a few
tokens per kept lesson instead of rewriting it: the reduce step's latency no longer grows with
the length of what it keeps. ``operations`` holds merged rewrites and new UPDATEs.
"""

from __future__ import annotations

from typing import Any, Sequence

import msgspec

from combee_fast.ace.playbook.format import ids_in
from combee_fast.roles import bounds
from combee_fast.roles.base import convert, decode_json_object, fill, load_prompt
from combee_fast.ace.ops import EDIT_KINDS, OPS_SCHEMA, op_json, ops_schema, parse_ops
from combee_fast.schema import CallError, Message
from combee_fast.ace.records import Op, OpKind

REDUCER_MAX_TOKENS = 2048
REDUCER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": bounds.text(bounds.REASONING_CHARS),
        "keep": bounds.array(bounds.text(bounds.ID_CHARS), bounds.MAX_KEEP),
        "operations": OPS_SCHEMA["properties"]["operations"],
    },
    "required": ["reasoning", "keep", "operations"],
    "additionalProperties": False,
}
"""JSON Schema of a reducer reply, for ``response_format``. Do not mutate."""

REDUCER_SYSTEM_PROMPT = load_prompt("reducer.txt", beside=__file__)
REDUCER_USER_TEMPLATE = load_prompt("reducer_user.txt", beside=__file__)

NO_ENTRIES_YET = "(no entries yet: every distinct lesson the proposals hold is new)"
"""Stands in for an empty playbook in the reducer's prompt, as the curator's own line does there
(:data:`combee_fast.ace.curator.NO_ENTRIES_YET`): Qwen2.5-Coder-0.5B, shown ``(the playbook is
empty)``, answered both reductions of a Combee run (13 and 20 proposed ADDs) "The playbook is
empty, so no operations were made." and kept none."""


class _KeepReply(msgspec.Struct):
    keep: list[str]


def op_ref(proposal: int, position: int) -> str:
    """The reference of operation ``position`` (from 0) of proposal ``proposal`` (from 0): "P1.1"."""
    return f"P{proposal + 1}.{position + 1}"


def _edits(ops: Sequence[Op]) -> list[Op]:
    return [op for op in ops if op.kind in EDIT_KINDS]


def reducer_schema(playbook_text: str, proposals: Sequence[Sequence[Op]]) -> dict[str, Any]:
    """:data:`REDUCER_SCHEMA` for one reduction: its operations as :func:`~combee_fast.ace.ops.ops_schema`
    makes them for ``playbook_text``; ``keep`` references that the prompt shows, no more of them
    than it shows (the 0.5B, given the references alone, listed "P1.2".."P1.5" over and over up to
    the bound); and, when the playbook has no entry and a proposal ADDs a lesson, at least one
    kept reference: every lesson is new there, and a reduction that keeps nothing loses the whole
    batch's learning (the 0.5B did, see :data:`NO_ENTRIES_YET`)."""
    refs = [op_ref(i, j) for i, ops in enumerate(proposals) for j, _ in enumerate(_edits(ops))]
    schema = bounds.with_ids(ops_schema(REDUCER_SCHEMA, playbook_text), ("keep", "*"), refs)
    keep = schema["properties"]["keep"]  # with_ids made it a new dict
    keep["maxItems"] = min(len(refs), bounds.MAX_KEEP)
    if any(op.kind is OpKind.ADD for ops in proposals for op in ops) and not ids_in(playbook_text):
        keep["minItems"] = 1
    return schema


def proposal_references(proposals: Sequence[Sequence[Op]]) -> dict[str, dict[str, str]]:
    """Every proposed operation in the operations format, by its reference (:func:`op_ref`), in
    proposal order."""
    return {op_ref(i, j): op_json(op) for i, ops in enumerate(proposals) for j, op in enumerate(_edits(ops))}


def reducer_messages(playbook_text: str, proposals: Sequence[Sequence[Op]]) -> tuple[Message, ...]:
    """System + user messages merging ``proposals`` (each one curator call's ops, in group order)."""
    lines = []
    for number, ops in enumerate(proposals):
        operations = [{"ref": op_ref(number, j), **op_json(op)} for j, op in enumerate(_edits(ops))]
        lines.append(msgspec.json.encode({"proposal": number + 1, "operations": operations}).decode())
    user = fill(
        REDUCER_USER_TEMPLATE,
        playbook=playbook_text if playbook_text.strip() else NO_ENTRIES_YET,
        proposals="\n".join(lines) or "(no proposals)",
    )
    return (Message("system", REDUCER_SYSTEM_PROMPT), Message("user", user))


def parse_reduction(data: Any, text: str | None, proposals: Sequence[Sequence[Op]]) -> tuple[Op, ...] | CallError:
    """The merged ops: kept proposal ops (in ``keep`` order, each once) then the written ones.

    References that name no proposed operation are ignored; a reply whose every reference is
    unknown and which writes no operation is a ``schema_mismatch`` naming the references.
    """
    written = parse_ops(data, text, own_prompt=REDUCER_SYSTEM_PROMPT)
    if isinstance(written, CallError):
        return written
    obj = decode_json_object(data, text)
    assert not isinstance(obj, CallError)  # parse_ops decoded the same reply
    reply = convert(obj, _KeepReply, text, what="reduction")
    if isinstance(reply, CallError):
        return reply
    by_ref = {op_ref(i, j): op for i, ops in enumerate(proposals) for j, op in enumerate(_edits(ops))}
    refs = [ref.strip().upper() for ref in reply.keep]
    kept = [by_ref[ref] for ref in dict.fromkeys(refs) if ref in by_ref]
    unknown = [ref for ref in refs if ref not in by_ref]
    if unknown and not kept and not written:
        return CallError("schema_mismatch", f"keep names no proposed operation: {', '.join(unknown[:5])}", raw=text)
    return tuple(kept) + tuple(written)
