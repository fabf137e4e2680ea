"""The reduce's pure parts: the fallback union and the topic split."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from combee_fast.combee.reduce import partition_proposals, union_edits
from combee_fast.ace.records import Op, OpKind

TEXT = lambda op: op.content  # noqa: E731 -- ACE's edit text and target, as AceLearner gives them
TARGET = lambda op: op.bullet_id  # noqa: E731


def test_union_edits_keeps_first_occurrences_in_order() -> None:
    a = Op(OpKind.ADD, section="s", content="x")
    b = Op(OpKind.ADD, section="s", content="y")
    assert union_edits([[a, b], [b, a], [a]]) == (a, b)


@settings(deadline=None)  # the first example loads the similarity kernels
@given(
    st.lists(st.lists(st.sampled_from(["a b c d", "a b c e", "x y z", "totally different", "zzz"]), max_size=6), max_size=8),
    st.integers(1, 7),
)
def test_partitions_keep_every_op_once_bounded_with_duplicates_together(texts, max_ops: int) -> None:
    proposals = [[Op(OpKind.ADD, section="s", content=f"{t} #{i}.{j}") for j, t in enumerate(ops)] for i, ops in enumerate(texts)]
    total = sum(len(p) for p in proposals)
    parts = partition_proposals(proposals, max_ops, threshold=0.5, text_of=TEXT, target_of=TARGET)
    flat = [op for part in parts for ops in part for op in ops]
    assert sorted(op.content for op in flat) == sorted(op.content for p in proposals for op in p)
    if total > max_ops:
        assert all(sum(len(ops) for ops in part) <= max_ops for part in parts)
    for part in parts:  # proposal order and op order survive inside a part
        positions = [next(i for i, p in enumerate(proposals) if ops[0] in p) for ops in part]
        assert positions == sorted(positions)


def test_near_duplicate_ops_share_a_part() -> None:
    same = "Convert percentages to decimals before substituting them into the formula"
    proposals = [[Op(OpKind.ADD, section="s", content=f"unrelated lesson number {i} about topic {i * 7}")] for i in range(6)]
    proposals[0] = [*proposals[0], Op(OpKind.ADD, section="s", content=same)]
    proposals[5] = [*proposals[5], Op(OpKind.ADD, section="s", content=same + ".")]
    parts = partition_proposals(proposals, 3, text_of=TEXT, target_of=TARGET)
    holding = [i for i, part in enumerate(parts) if any(op.content.startswith("Convert") for ops in part for op in ops)]
    assert len(parts) >= 3 and len(holding) == 1
