"""Unit tests of Playbook: each op kind, rejection reasons, eviction order, render/parse, diff."""

import re

import pytest

from combee_fast.errors import ConfigError, PlaybookParseError
from combee_fast.ace.playbook import DEFAULT_SECTIONS, Playbook, PlaybookDiff, aggregate_tags
from combee_fast.ace.records import Delta, Op, OpKind
from combee_fast.tokens import estimate_tokens


def add(section: str, content: str) -> Op:
    return Op(OpKind.ADD, section=section, content=content)


def update(bullet_id: str, content: str) -> Op:
    return Op(OpKind.UPDATE, bullet_id=bullet_id, content=content)


def remove(bullet_id: str) -> Op:
    return Op(OpKind.REMOVE, bullet_id=bullet_id)


def tag(bullet_id: str, helpful: int = 0, harmful: int = 0) -> Op:
    return Op(OpKind.TAG, bullet_id=bullet_id, helpful=helpful, harmful=harmful)


def apply(playbook: Playbook, *ops: Op, rollout_ids: tuple[str, ...] = ()):
    return playbook.apply(Delta(ops=ops, source="test", rollout_ids=rollout_ids))


def reasons(report) -> list[str]:
    return [r.reason for r in report.rejected]


@pytest.fixture
def base() -> Playbook:
    playbook, report = apply(
        Playbook.empty(),
        add("formulas_and_calculations", "ROI = (gain - cost) / cost"),
        add("common_mistakes", "Percent change divides by the old value"),
        add("formulas_and_calculations", "CAGR = (end / start) ** (1 / years) - 1"),
        rollout_ids=("train:1#r0",),
    )
    assert report.added_ids == ("form-00001", "mist-00002", "form-00003")
    return playbook


# -- empty --------------------------------------------------------------------------------------


def test_empty_playbook_has_version_zero_and_renders_nothing():
    playbook = Playbook.empty()
    assert (playbook.version, len(playbook), playbook.render(), playbook.tokens()) == (0, 0, "", 0)
    assert playbook.sections == DEFAULT_SECTIONS
    assert playbook.next_id == 1 and playbook.removed_ids() == frozenset()


@pytest.mark.parametrize(
    "options, named",
    [
        ({"token_budget": 0}, "token_budget"),
        ({"max_bullet_chars": -1}, "max_bullet_chars"),
        ({"sections": ("Bad Name",)}, "Bad Name"),
        ({"sections": ("a", "a")}, "repeat"),
    ],
)
def test_empty_rejects_invalid_options_naming_them(options, named):
    with pytest.raises(ConfigError, match=named):
        Playbook.empty(**options)


def test_attributes_are_read_only(base):
    with pytest.raises(AttributeError):
        base.version = 7  # type: ignore[misc]


# -- ADD ----------------------------------------------------------------------------------------


def test_add_assigns_slug_and_global_counter_with_provenance(base):
    bullet = base.get("form-00003")
    assert bullet is not None
    assert bullet.section == "formulas_and_calculations"
    assert (bullet.helpful, bullet.harmful, bullet.created_version, bullet.updated_version) == (0, 0, 1, 1)
    assert bullet.source_rollout_ids == ("train:1#r0",)
    assert base.version == 1 and base.next_id == 4 and len(base) == 3


def test_add_normalises_section_and_trims_content(base):
    after, report = apply(base, add("  Verification Checklist ", "  Re-add the units.\n"))
    assert report.added_ids == ("check-00004",)
    assert after.get("check-00004").content == "Re-add the units."


def test_add_to_unknown_valid_section_creates_user_section_at_the_end(base):
    after, report = apply(base, add("tool_calls", "Pass dates as ISO 8601"))
    assert report.added_ids == ("toolcall-00004",)
    assert after.sections == DEFAULT_SECTIONS + ("tool_calls",)
    assert base.sections == DEFAULT_SECTIONS


@pytest.mark.parametrize(
    "op, reason_start",
    [
        (add("", "content"), "missing section"),
        (add("9lives", "content"), "invalid section name"),
        (add("x" * 41, "content"), "invalid section name"),
        (add("other", ""), "empty content"),
        (add("other", " \t "), "empty content"),
        (add("other", "line one\nline two"), "content has a line break"),
        (add("other", "a\u2028b"), "content has a line break"),
        (add("other", "x" * 1001), "content too long"),
    ],
)
def test_add_rejects_bad_input_with_reason_and_applies_the_rest(base, op, reason_start):
    after, report = apply(base, op, add("other", "fine"))
    assert report.applied == (1,)
    assert [(r.op_index, r.op) for r in report.rejected] == [(0, op)]
    assert reasons(report)[0].startswith(reason_start)
    assert report.added_ids == ("other-00004",)  # the rejected ADD consumed no counter
    assert after.sections == base.sections


def test_max_bullet_chars_is_the_content_limit():
    playbook = Playbook.empty(max_bullet_chars=10)
    after, report = apply(playbook, add("other", "x" * 10), add("other", "x" * 11))
    assert report.applied == (0,) and reasons(report) == ["content too long: 11 chars, limit 10"]


# -- UPDATE -------------------------------------------------------------------------------------


def test_update_replaces_content_and_keeps_counters(base):
    tagged, _ = apply(base, tag("form-00001", helpful=3, harmful=1))
    after, report = apply(tagged, update("form-00001", "ROI = net gain / cost"), rollout_ids=("train:9#r1",))
    bullet = after.get("form-00001")
    assert report.applied == (0,)
    assert (bullet.content, bullet.helpful, bullet.harmful) == ("ROI = net gain / cost", 3, 1)
    assert (bullet.created_version, bullet.updated_version, after.version) == (1, 3, 3)
    assert bullet.source_rollout_ids == ("train:9#r1",)
    assert [b.id for b in after.bullets()] == [b.id for b in tagged.bullets()]  # keeps its place


@pytest.mark.parametrize(
    "op, reason_start",
    [
        (update("form-00099", "x"), "unknown id"),
        (Op(OpKind.UPDATE, content="x"), "missing bullet_id"),
        (update("form-00001", ""), "empty content"),
        (update("form-00001", "ROI = (gain - cost) / cost"), "unchanged"),
    ],
)
def test_update_rejections(base, op, reason_start):
    after, report = apply(base, op)
    assert after is base and reasons(report)[0].startswith(reason_start)


def test_content_another_bullet_has_is_rejected_as_a_duplicate_until_that_bullet_is_gone(base):
    """A 0.5B curator wrote one ADD five times in one reply: only the first may take effect."""
    lesson = "NPV = sum of cash flows discounted at the rate"
    after, report = apply(base, *[add("formulas_and_calculations", lesson)] * 3,
                          add("other", " ROI = (gain - cost) / cost "), update("mist-00002", "CAGR = (end / start) ** (1 / years) - 1"))
    assert report.applied == (0,) and report.added_ids == ("form-00004",)
    assert reasons(report) == ["duplicate: bullet form-00004 already has this content"] * 2 + [
        "duplicate: bullet form-00001 already has this content", "duplicate: bullet form-00003 already has this content"]
    later, report = apply(after, remove("form-00004"), add("other", lesson), update("form-00003", "CAGR, the yearly rate"),
                          update("mist-00002", "CAGR = (end / start) ** (1 / years) - 1"))
    assert report.applied == (0, 1, 2, 3) and later.get("other-00005").content == lesson  # freed by the remove


# -- REMOVE -------------------------------------------------------------------------------------


def test_remove_tombstones_the_id_forever(base):
    after, report = apply(base, remove("mist-00002"))
    assert report.applied == (0,)
    assert "mist-00002" not in after and after.get("mist-00002") is None
    assert after.removed_ids() == {"mist-00002"}
    later, report = apply(
        after, update("mist-00002", "new"), tag("mist-00002", helpful=1), remove("mist-00002"), add("common_mistakes", "y")
    )
    assert reasons(report)[:3] == ["removed: bullet mist-00002 was removed"] * 3
    assert report.added_ids == ("mist-00004",)  # counter never goes back


def test_ops_after_a_remove_in_the_same_delta_see_it_removed(base):
    after, report = apply(base, remove("form-00001"), update("form-00001", "x"))
    assert report.applied == (0,) and reasons(report)[0].startswith("removed")


def test_ops_may_target_a_bullet_added_earlier_in_the_same_delta(base):
    after, report = apply(base, add("other", "new"), update("other-00004", "newer"), tag("other-00004", helpful=2))
    assert report.applied == (0, 1, 2)
    assert (after.get("other-00004").content, after.get("other-00004").helpful) == ("newer", 2)


# -- TAG ----------------------------------------------------------------------------------------


def test_tags_in_one_delta_are_summed(base):
    after, report = apply(
        base, tag("form-00001", helpful=1), tag("form-00001", helpful=2, harmful=1), tag("mist-00002", harmful=4)
    )
    assert report.applied == (0, 1, 2)
    assert (after.get("form-00001").helpful, after.get("form-00001").harmful) == (3, 1)
    assert (after.get("mist-00002").helpful, after.get("mist-00002").harmful) == (0, 4)
    assert after.get("form-00001").updated_version == 2
    assert after.get("form-00003") == base.get("form-00003")


@pytest.mark.parametrize(
    "op, reason_start",
    [
        (tag("form-00001", helpful=-1), "negative increment"),
        (tag("form-00001", helpful=2, harmful=-1), "negative increment"),
        (tag("form-00001"), "no increment"),
        (tag("nope-00001", helpful=1), "unknown id"),
        (Op(OpKind.TAG, helpful=1), "missing bullet_id"),
    ],
)
def test_tag_rejections(base, op, reason_start):
    after, report = apply(base, op)
    assert after is base and reasons(report)[0].startswith(reason_start)


def test_tag_then_remove_in_one_delta_drops_the_tagged_bullet(base):
    after, report = apply(base, tag("form-00001", helpful=1), remove("form-00001"))
    assert report.applied == (0, 1) and "form-00001" not in after


def test_aggregate_tags_sums_per_id():
    ops = [tag("a-1", 1, 0), tag("b-2", 0, 2), tag("a-1", 2, 3)]
    assert aggregate_tags(ops) == {"a-1": (3, 3), "b-2": (0, 2)}
    with pytest.raises(ValueError, match="without bullet_id"):
        aggregate_tags([Op(OpKind.TAG, helpful=1)])


# -- versions and snapshots ---------------------------------------------------------------------


def test_delta_with_no_effect_returns_the_same_snapshot(base):
    after, report = apply(base, update("zzz-00001", "x"), tag("form-00001"))
    assert after is base and after.version == 1 and report.applied == ()
    assert len(report.rejected) == 2


def test_apply_leaves_the_old_snapshot_whole(base):
    before = (base.render(), base.bullets(), base.removed_ids(), base.sections, base.next_id, base.version)
    apply(base, add("new_section", "a"), update("form-00001", "b"), remove("mist-00002"), tag("form-00003", 5, 1))
    assert (base.render(), base.bullets(), base.removed_ids(), base.sections, base.next_id, base.version) == before


# -- token budget -------------------------------------------------------------------------------


LINE = len("[other-00001] helpful=0 harmful=0 :: aaaa") + 1  # every bullet below, counters < 10
FOUR_BULLETS_TOKENS = (len("## other") + 4 * LINE) // 4  # exactly 4 such bullets fit


def four_scored_bullets() -> Playbook:
    """Scores +2, -1, 0, 0 for other-00001..04; 1 and 2 created at v1, 3 and 4 at v2; full."""
    playbook, _ = apply(Playbook.empty(token_budget=FOUR_BULLETS_TOKENS), add("other", "aaaa"), add("other", "bbbb"))
    playbook, _ = apply(playbook, add("other", "cccc"), add("other", "dddd"))
    playbook, report = apply(playbook, tag("other-00001", helpful=2), tag("other-00002", harmful=1))
    assert report.evicted == () and playbook.tokens() == FOUR_BULLETS_TOKENS
    return playbook


def test_budget_evicts_lowest_score_then_oldest_and_reports_them():
    playbook = four_scored_bullets()
    long_content = "e" * (4 + LINE)  # takes the room of two bullets
    after, report = apply(playbook, add("other", long_content))
    assert report.applied == (0,) and report.added_ids == ("other-00005",)
    assert [b.id for b in report.evicted] == ["other-00002", "other-00003"]
    assert report.evicted[0].harmful == 1  # reported as it was when evicted
    assert after.removed_ids() == {"other-00002", "other-00003"}
    assert [b.id for b in after.bullets()] == ["other-00001", "other-00004", "other-00005"]
    assert after.tokens() <= FOUR_BULLETS_TOKENS and estimate_tokens(after.render()) == after.tokens()


def test_budget_evicts_only_as_much_as_needed():
    after, report = apply(four_scored_bullets(), add("other", "eeee"))
    assert [b.id for b in report.evicted] == ["other-00002"]
    assert len(after) == 4


def test_budget_can_evict_a_bullet_added_in_the_same_delta():
    playbook = four_scored_bullets()
    playbook, _ = apply(playbook, tag("other-00002", helpful=2), tag("other-00003", helpful=1), tag("other-00004", helpful=1))
    after, report = apply(playbook, add("other", "eeee"))
    assert report.added_ids == ("other-00005",) and [b.id for b in report.evicted] == ["other-00005"]
    assert "other-00005" in after.removed_ids() and after.next_id == 6


def test_add_or_update_that_can_never_fit_is_rejected_not_evicting():
    playbook = four_scored_bullets()
    too_big = "x" * (FOUR_BULLETS_TOKENS * 4)
    after, report = apply(playbook, add("other", too_big), update("other-00001", too_big))
    assert after is playbook
    assert all(reason.startswith("does not fit token_budget") for reason in reasons(report))


def test_a_budget_rejected_add_consumes_no_counter():
    playbook = four_scored_bullets()
    after, report = apply(playbook, add("other", "x" * (FOUR_BULLETS_TOKENS * 4)), add("new_rules", "ok"))
    assert report.applied == (1,) and report.added_ids == ("newrules-00005",)
    assert after.sections[-1] == "new_rules" and after.next_id == 6


# -- render and parse ---------------------------------------------------------------------------


def test_render_is_the_ace_line_format(base):
    tagged, _ = apply(base, tag("mist-00002", helpful=12, harmful=3))
    assert tagged.render() == (
        "## formulas_and_calculations\n"
        "[form-00001] helpful=0 harmful=0 :: ROI = (gain - cost) / cost\n"
        "[form-00003] helpful=0 harmful=0 :: CAGR = (end / start) ** (1 / years) - 1\n"
        "\n"
        "## common_mistakes\n"
        "[mist-00002] helpful=12 harmful=3 :: Percent change divides by the old value"
    )
    assert tagged.tokens() == estimate_tokens(tagged.render())


def test_parse_round_trips_and_continues_the_counter(base):
    parsed = Playbook.parse(base.render())
    assert parsed.render() == base.render()
    assert [(b.id, b.section, b.content) for b in parsed.bullets()] == [(b.id, b.section, b.content) for b in base.bullets()]
    assert parsed.next_id == 4 and parsed.version == 1
    _, report = apply(parsed, add("formulas_and_calculations", "new"))
    assert report.added_ids == ("form-00004",)


def test_parse_tolerates_crlf_blank_lines_and_repeated_headers():
    text = "\r\n## other\r\n[o-7] helpful=1 harmful=2 :: a :: b [x]\r\n\r\n\r\n## other\r\n  [o-3] helpful=0 harmful=0 :: c  \r\n"
    parsed = Playbook.parse(text)
    assert [(b.id, b.content, b.helpful, b.harmful) for b in parsed.bullets()] == [("o-7", "a :: b [x]", 1, 2), ("o-3", "c", 0, 0)]
    assert parsed.next_id == 8


def test_parse_keeps_text_section_order_and_merges_known_sections():
    text = "## other\n[o-1] helpful=0 harmful=0 :: a\n\n## mine\n[m-2] helpful=0 harmful=0 :: b\n\n## common_mistakes\n[c-3] helpful=0 harmful=0 :: c"
    parsed = Playbook.parse(text)
    assert parsed.render() == text
    # Text order first; known sections merged in after their predecessor among the known ones.
    assert parsed.sections == (
        "strategies_and_hard_rules", "formulas_and_calculations", "other", "mine",
        "common_mistakes", "verification_checklist", "domain_concepts",
    )


@pytest.mark.parametrize(
    "text, line_number, problem",
    [
        ("## other\nnot a bullet", 2, "not a playbook line"),
        ("[o-1] helpful=0 harmful=0 :: a", 1, "bullet before any"),
        ("## Other Things\n", 1, "invalid section name"),
        ("## other\n[o-1] helpful=0 harmful=0 :: a\n[o-1] helpful=0 harmful=0 :: b", 3, "duplicate id o-1 (first on line 2)"),
        ("## other\n[no counter] helpful=0 harmful=0 :: a", 2, "invalid bullet id"),
        ("## other\n[o-1] helpful=-1 harmful=0 :: a", 2, "not a playbook line"),
        ("## other\n\n[o-1] helpful=0 harmful=0 :: " + "x" * 1001, 3, "content too long"),
    ],
)
def test_parse_errors_name_the_line(text, line_number, problem):
    with pytest.raises(PlaybookParseError, match=re.escape(problem)) as caught:
        Playbook.parse(text)
    assert caught.value.line_number == line_number
    assert f"line {line_number}" in str(caught.value)


def test_parse_over_budget_names_the_first_line_past_it():
    text = "## other\n" + "\n".join(f"[o-{i}] helpful=0 harmful=0 :: {'x' * 20}" for i in range(1, 6))
    with pytest.raises(PlaybookParseError, match="token_budget") as caught:
        Playbook.parse(text, token_budget=30)  # 120 chars: the header and two 49-char lines fit, not three
    assert caught.value.line_number == 4


def test_parse_rejects_invalid_options():
    with pytest.raises(ConfigError, match="max_bullet_chars"):
        Playbook.parse("", max_bullet_chars=0)


# -- diff ---------------------------------------------------------------------------------------


def test_diff_lists_added_updated_removed(base):
    after, _ = apply(base, add("other", "new"), update("form-00003", "changed"), tag("form-00001", helpful=1), remove("mist-00002"))
    assert base.diff(after) == PlaybookDiff(added=("other-00004",), updated=("form-00001", "form-00003"), removed=("mist-00002",))
    assert after.diff(base) == PlaybookDiff(added=("mist-00002",), updated=("form-00001", "form-00003"), removed=("other-00004",))
    assert base.diff(base) == PlaybookDiff()


def test_diff_ignores_version_only_differences(base):
    assert base.diff(Playbook.parse(base.render())) == PlaybookDiff()
