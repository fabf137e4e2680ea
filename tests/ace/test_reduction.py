"""The reducer keeps proposed operations by reference and writes only what it changes."""

from __future__ import annotations

from combee_fast.ace.reducer import parse_reduction
from combee_fast.schema import CallError
from combee_fast.ace.records import Op, OpKind

PROPOSALS = [
    [Op(OpKind.ADD, "other", "Check units."), Op(OpKind.ADD, "other", "Percent as decimal.")],
    [Op(OpKind.ADD, "other", "Check units again."), Op(OpKind.REMOVE, bullet_id="form-00001")],
]


def test_kept_references_come_back_verbatim_in_keep_order_then_written_ops() -> None:
    text = (
        '{"reasoning": "r", "keep": ["P2.2", "p1.2", "P1.2"], "operations": '
        '[{"type": "ADD", "section": "other", "content": "Check units in every input.", "bullet_id": ""}]}'
    )
    ops = parse_reduction(None, text, PROPOSALS)
    assert ops == (PROPOSALS[1][1], PROPOSALS[0][1], Op(OpKind.ADD, "other", "Check units in every input."))


def test_unknown_references_are_ignored_unless_nothing_is_usable() -> None:
    assert parse_reduction(None, '{"reasoning": "r", "keep": ["P9.9", "P1.1"], "operations": []}', PROPOSALS) == (
        PROPOSALS[0][0],
    )
    error = parse_reduction(None, '{"reasoning": "r", "keep": ["P9.9"], "operations": []}', PROPOSALS)
    assert isinstance(error, CallError) and error.kind == "schema_mismatch" and "P9.9" in error.message


def test_an_empty_reduction_is_a_valid_no_change() -> None:
    assert parse_reduction(None, '{"reasoning": "nothing", "keep": [], "operations": []}', PROPOSALS) == ()


def test_a_reply_without_keep_is_a_schema_mismatch_and_bad_json_is_malformed() -> None:
    missing = parse_reduction(None, '{"reasoning": "r", "operations": []}', PROPOSALS)
    assert isinstance(missing, CallError) and missing.kind == "schema_mismatch" and "keep" in missing.message
    broken = parse_reduction(None, '{"reasoning": "r", "keep": [,]}', PROPOSALS)
    assert isinstance(broken, CallError) and broken.kind in ("malformed_json", "truncated")
