"""GEPA's proposer: a rewrite is one edit of its component, or nothing."""

from __future__ import annotations

from combee_fast.gepa.calls import Rewrite
from combee_fast.gepa.candidate import SYSTEM_PROMPT, Candidate
from combee_fast.gepa.learner import ComponentText, GepaProposer
from combee_fast.schema import CallError, Usage


class _Calls:
    def __init__(self, rewrite: Rewrite) -> None:
        self.rewrite = rewrite
        self.seen: list[tuple[str, list[str]]] = []

    async def propose(self, current, evaluations, *, seed_path, component) -> Rewrite:
        return self.rewrite

    async def aggregate(self, current, texts, *, seed_path) -> Rewrite:
        self.seen.append((current, list(texts)))
        return self.rewrite


async def test_a_changed_text_is_one_edit_of_the_component() -> None:
    learner = GepaProposer(_Calls(Rewrite("new text", Usage())), SYSTEM_PROMPT)
    proposal = await learner.propose([], None, "old text", source="proposer[0]", seed_path=(0, 0))
    assert proposal.edits == (ComponentText(SYSTEM_PROMPT, "new text"),)
    assert learner.edit_target(proposal.edits[0]) == SYSTEM_PROMPT and learner.edit_text(proposal.edits[0]) == "new text"


async def test_an_unchanged_text_or_a_failed_call_proposes_nothing() -> None:
    same = GepaProposer(_Calls(Rewrite("old text", Usage())), SYSTEM_PROMPT)
    assert (await same.propose([], None, "old text", source="p", seed_path=(0,))).edits == ()
    failed = GepaProposer(_Calls(Rewrite(None, Usage(), CallError("malformed_json", "bad"))), SYSTEM_PROMPT)
    proposal = await failed.propose([], None, "old text", source="p", seed_path=(0,))
    assert proposal.edits == () and proposal.error is not None


async def test_merge_hands_every_rewrite_to_one_aggregation_call() -> None:
    calls = _Calls(Rewrite("merged", Usage()))
    learner = GepaProposer(calls, SYSTEM_PROMPT)
    merged = await learner.merge(
        [(ComponentText(SYSTEM_PROMPT, "a"),), (ComponentText(SYSTEM_PROMPT, "b"),)], "base", source="aggregator[0.0]",
        seed_path=(1, 0, 0),
    )
    assert calls.seen == [("base", ["a", "b"])]
    assert merged.edits == (ComponentText(SYSTEM_PROMPT, "merged"),)


def test_a_child_replaces_one_component_and_names_its_parent(tmp_path) -> None:
    parent = Candidate({"a": "one", "b": "two"})
    child = parent.replaced("b", "three", parent=4)
    assert child.components == {"a": "one", "b": "three"} and child.parents == (4,)
    assert child.render() == "## a\none\n\n## b\nthree"
    child.save(tmp_path / "c.json")
    assert Candidate.load(tmp_path / "c.json") == child
    assert Candidate.seed().render().startswith("You answer questions")
