"""The operations format shared by the curator and the reducer, and its parsing into :class:`Op`.

Reply: ``{"reasoning": str, "operations": [{"type": "ADD"|"UPDATE"|"REMOVE", "section": str,
"content": str, "bullet_id": str}]}`` (``bullet_id`` is ``""`` for ADD).

Parsing contract of :func:`parse_ops`:
- A reply that is not a JSON object with a string ``reasoning`` and a list ``operations`` is a
  :class:`CallError` (``malformed_json``, ``truncated`` or ``schema_mismatch`` naming the key).
- Each operation is read on its own. One that cannot become an :class:`Op` is dropped: not an
  object, a ``type`` other than ADD/UPDATE/REMOVE (any case), or a field of the wrong type. Missing
  ``section``/``content``/``bullet_id`` read as empty.
- An ADD or UPDATE whose content or section is a copy of the prompt (a placeholder such as
  ``<the lesson>``, or a passage of the role's own instructions ``own_prompt``:
  :func:`~combee_fast.roles.base.copies_prompt`) is dropped too.
- The rest are normalised and kept, even when the playbook will refuse them (unknown or missing
  bullet id, empty content): :meth:`Playbook.apply` rejects those with a reason in its report, so
  nothing is lost silently. Normalising: content and section collapse whitespace to one line;
  section becomes lower_snake_case ("Common Mistakes" -> "common_mistakes"); ids lose brackets;
  ADD ignores ``bullet_id``; REMOVE ignores ``content``.
- When operations were given but every one was dropped, the result is a :class:`CallError` listing
  why: ``placeholder`` when each was a copy of the prompt, ``schema_mismatch`` otherwise. An empty
  ``operations`` list is a valid "no change" (``()``).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from combee_fast.ace.playbook.format import ids_in
from combee_fast.roles import bounds
from combee_fast.roles.base import (PLACEHOLDER_PROBLEM, PROMPT_COPY_PROBLEM, clean_id, convert, copies_prompt,
                                    decode_json_object, is_placeholder, one_line)
from combee_fast.schema import CallError, ErrorKind
from combee_fast.ace.records import Op, OpKind

EDIT_KINDS = (OpKind.ADD, OpKind.UPDATE, OpKind.REMOVE)
_KINDS_BY_NAME = {kind.value: kind for kind in EDIT_KINDS}
_NOT_SECTION_CHARS = re.compile(r"[^a-z0-9]+")
_SHOWN_PROBLEMS = 5

OPS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": bounds.text(bounds.REASONING_CHARS),
        "operations": bounds.array({
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": [kind.value for kind in EDIT_KINDS]},
                "section": bounds.text(bounds.CONTENT_CHARS),
                "content": bounds.text(bounds.CONTENT_CHARS),
                "bullet_id": bounds.text(bounds.ID_CHARS),
            },
            "required": ["type", "section", "content", "bullet_id"],
            "additionalProperties": False,
        }, bounds.MAX_OPS),
    },
    "required": ["reasoning", "operations"],
    "additionalProperties": False,
}
"""JSON Schema of a curator or reducer reply, for ``response_format``. Do not mutate; a request's
schema enumerates the playbook's ids (:func:`ops_schema`)."""


def ops_schema(schema: dict[str, Any], playbook_text: str, *, must_add: bool = False) -> dict[str, Any]:
    """``schema`` (curator's or reducer's) whose operations each take one of two shapes: an ADD,
    whose ``bullet_id`` is ``""``, or an UPDATE or REMOVE, whose ``bullet_id`` is an id of
    ``playbook_text``. When the playbook has no entry only the ADD shape is left: an UPDATE or a
    REMOVE would have no id to name. A constraining server decodes the kind first, so the grammar
    holds each kind to its own ids. (Qwen2.5-Coder-1.5B, curating an empty playbook under the
    schema with every kind, wrote three UPDATE or REMOVE operations with ``bullet_id`` ``""``; the
    0.5B, with one id to name, wrote 9 such UPDATEs in one sequential run: all rejected, ``missing
    bullet_id``.) ``must_add``: and, when the playbook has no entry, at least one ADD (see
    :meth:`~combee_fast.ace.calls.AceCalls.curate`)."""
    ids = ids_in(playbook_text)
    operations = dict(schema["properties"]["operations"])
    add = _op_shape(operations["items"], (OpKind.ADD,), ("",))
    if ids:
        operations["items"] = {"anyOf": [add, _op_shape(operations["items"], (OpKind.UPDATE, OpKind.REMOVE), ids)]}
    else:
        operations["items"] = add
        if must_add:
            operations["minItems"] = 1
    return {**schema, "properties": {**schema["properties"], "operations": operations}}


def _op_shape(item: dict[str, Any], kinds: tuple[OpKind, ...], ids: tuple[str, ...]) -> dict[str, Any]:
    """A copy of the operation schema ``item`` whose ``type`` is one of ``kinds`` and whose
    ``bullet_id`` is one of ``ids``."""
    kind = {"type": "string", "enum": [k.value for k in kinds]}
    return {**item, "properties": {**item["properties"], "type": kind, "bullet_id": bounds.id_schema(ids)}}


class _OpsReply(msgspec.Struct):
    reasoning: str
    operations: list[Any]


class _OpReply(msgspec.Struct):
    type: str
    section: str = ""
    content: str = ""
    bullet_id: str | None = None


def section_name(text: str) -> str:
    """A section name as models write it ("Common Mistakes") made lower_snake_case ("common_mistakes")."""
    return _NOT_SECTION_CHARS.sub("_", text.strip().lower()).strip("_")


def _to_op(raw: Any, position: int, own_prompt: str) -> Op | str:
    """``raw`` as an :class:`Op`, or why it cannot be one (``own_prompt``: the instructions its
    content must not copy)."""
    try:
        reply = msgspec.convert(raw, _OpReply)
    except msgspec.ValidationError as exc:
        return f"operations[{position}]: {exc}"
    kind = _KINDS_BY_NAME.get(reply.type.strip().upper())
    if kind is None:
        return f"operations[{position}]: unknown type {reply.type!r} (expected ADD, UPDATE or REMOVE)"
    bullet_id = clean_id(reply.bullet_id or "") or None
    content = one_line(reply.content)
    if kind is not OpKind.REMOVE and (is_placeholder(content) or is_placeholder(reply.section)):
        return f"operations[{position}]: {PLACEHOLDER_PROBLEM}"
    if kind is not OpKind.REMOVE and copies_prompt(content, own_prompt):
        return f"operations[{position}]: {PROMPT_COPY_PROBLEM}: {content[:80]!r}"
    if kind is OpKind.ADD:
        bullet_id = None
    elif kind is OpKind.REMOVE:
        content = ""
    return Op(kind, section=section_name(reply.section), content=content, bullet_id=bullet_id)


def parse_ops(data: Any, text: str | None, *, own_prompt: str) -> tuple[Op, ...] | CallError:
    """Curator or reducer output as ops (see the module docstring for what is kept and dropped);
    ``own_prompt``: the system prompt of the role that wrote it."""
    obj = decode_json_object(data, text)
    if isinstance(obj, CallError):
        return obj
    reply = convert(obj, _OpsReply, text, what="operations")
    if isinstance(reply, CallError):
        return reply
    ops: list[Op] = []
    problems: list[str] = []
    for position, raw in enumerate(reply.operations):
        result = _to_op(raw, position, own_prompt)
        if isinstance(result, Op):
            ops.append(result)
        else:
            problems.append(result)
    if reply.operations and not ops:
        shown = "; ".join(problems[:_SHOWN_PROBLEMS])
        more = f" (and {len(problems) - _SHOWN_PROBLEMS} more)" if len(problems) > _SHOWN_PROBLEMS else ""
        copies = all(p.endswith(PLACEHOLDER_PROBLEM) or PROMPT_COPY_PROBLEM in p for p in problems)
        kind: ErrorKind = "placeholder" if copies else "schema_mismatch"
        return CallError(kind, f"no usable operation: {shown}{more}", raw=text)
    return tuple(ops)


def op_json(op: Op) -> dict[str, str]:
    """``op`` in the operations format models read and write."""
    return {"type": op.kind.value, "section": op.section, "content": op.content, "bullet_id": op.bullet_id or ""}
