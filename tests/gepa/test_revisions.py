"""Revisions as line changes: what the aggregator reads and how its reply is composed."""

from __future__ import annotations

from combee_fast.gepa.revisions import Changes, changes, changes_text, compose, rebase

BASE = "Intro line.\n- old lesson A\n- old lesson B"


def test_changes_are_the_dropped_base_lines_and_the_added_lines_with_references() -> None:
    revision = "Intro line.\n- old lesson B\n- new lesson C\n- new lesson D\n- new lesson C"
    assert changes(BASE, revision, 2) == Changes((2,), (("2.1", "- new lesson C"), ("2.2", "- new lesson D")))
    assert changes(BASE, BASE, 1) == Changes((), ())
    reordered = "- old lesson B\nIntro line.\n- old lesson A"
    assert changes(BASE, reordered, 1) == Changes((), ())


def test_the_aggregator_reads_every_revisions_changes() -> None:
    text = changes_text(BASE, [BASE + "\n- new C", "Intro line.\n- old lesson A"])
    assert text == (
        "### Revision 1\ndrops:\n(none)\nadds:\n[1.1] - new C\n\n"
        "### Revision 2\ndrops:\n(3) - old lesson B\nadds:\n(none)"
    )


def test_compose_keeps_referenced_lines_word_for_word_once_and_ignores_unknown_references() -> None:
    revisions = [BASE + "\n- new C\n- new D", BASE + "\n- new C\n- new E"]
    merged = compose(BASE, revisions, remove=[2], keep=["1.1", "2.2", "1.1", "9.9"], add=["- merged F", ""])
    assert merged == "Intro line.\n- old lesson B\n- new C\n- new E\n- merged F"
    assert compose(BASE, revisions, [], [], []) == BASE


def test_rebase_makes_a_revisions_changes_to_another_text() -> None:
    revision = "Intro line.\n- old lesson B\n- new C"  # drops lesson A, adds C
    onto = "Intro line.\n- old lesson A\n- old lesson B\n- sibling D"
    assert rebase(BASE, revision, onto) == "Intro line.\n- old lesson B\n- sibling D\n- new C"
    assert rebase(BASE, BASE, onto) == onto  # no change to make
    assert rebase(BASE, BASE + "\n- sibling D", onto) == onto  # what it adds is there already
