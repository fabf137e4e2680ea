"""Role messages: every tag the simulated task world reads, each on its own line, content verbatim."""

from __future__ import annotations

import re

import orjson

from combee_fast.ace.playbook import Playbook
from combee_fast.ace.curator import NO_ENTRIES_YET, curator_messages, playbook_stats_text
from combee_fast.ace.generator import generator_messages, reflection_text
from combee_fast.ace.reducer import NO_ENTRIES_YET as REDUCER_NO_ENTRIES_YET, reducer_messages
from combee_fast.ace.reflector import cited_bullets_text, reflector_messages
from combee_fast.ace.playbook.format import EMPTY_PLAYBOOK
from combee_fast.roles.base import fill
from combee_fast.ace.generator import NO_REFLECTION
from combee_fast.ace.reflector import REFLECTOR_NO_GROUND_TRUTH_SYSTEM_PROMPT, REFLECTOR_SYSTEM_PROMPT
from combee_fast.schema import CallError, Example, Rollout, Usage
from combee_fast.ace.records import Bullet, BulletTag, Delta, Op, OpKind, Reflection

PLAYBOOK = (
    "## formulas_and_calculations\n"
    "[form-00001] helpful=3 harmful=0 :: Current ratio = current assets / current liabilities.\n"
    "\n"
    "## common_mistakes\n"
    "[mist-00002] helpful=0 harmful=2 :: Percentages: give $ amounts as {plain} numbers."
)
QUESTION = 'A firm has $1,000,000 of assets and ${x} liabilities.\nFind "the ratio".'


def tag_content(text: str, tag: str) -> str | None:
    """What a parser reading `<tag>` / `</tag>` lines finds between them (None if the tag is absent)."""
    matches = re.findall(rf"^<{tag}>\n(.*?)\n</{tag}>$", text, re.DOTALL | re.MULTILINE)
    assert len(matches) <= 1, f"tag {tag} appears {len(matches)} times"
    return matches[0] if matches else None


def reflection(rollout_id: str = "train:3#r0", insight: str = "Use the current ratio formula.") -> Reflection:
    return Reflection(
        rollout_id=rollout_id,
        reasoning="compared",
        error_identification="divided the wrong way",
        root_cause="confused numerator and denominator",
        correct_approach="assets / liabilities",
        key_insight=insight,
        bullet_tags=(BulletTag("form-00001", "helpful"),),
        usage=Usage(role="reflector"),
    )


def rollout(**changes) -> Rollout:
    values = dict(
        example=Example(3, QUESTION, "2.0", "train", {"formula": "Current Ratio"}),
        round=0,
        messages=(),
        answer="0.5",
        reasoning="liabilities / assets = 0.5",
        cited=("form-00001",),
        score=0.0,
        feedback="Your answer 0.50 does not match the expected 2.00.",
        usage=Usage(role="generator"),
    )
    values.update(changes)
    return Rollout(**values)


def test_generator_first_round_has_playbook_and_question_only():
    system, user = generator_messages(QUESTION, PLAYBOOK)
    assert (system.role, user.role) == ("system", "user")
    assert "final_answer" in system.content and "bullet_ids" in system.content
    assert tag_content(user.content, "playbook") == PLAYBOOK
    assert tag_content(user.content, "question") == QUESTION
    assert tag_content(user.content, "previous_attempt") is None
    assert tag_content(user.content, "reflection") is None
    assert "\n\n\n" not in user.content


def test_generator_retry_round_adds_previous_attempt_and_reflection():
    _, user = generator_messages(QUESTION, PLAYBOOK, retry=("0.5", reflection_text(reflection())))
    assert tag_content(user.content, "question") == QUESTION
    assert tag_content(user.content, "previous_attempt") == "0.5"
    shown = tag_content(user.content, "reflection")
    assert shown is not None
    for part in ("divided the wrong way", "confused numerator", "assets / liabilities", "Use the current ratio formula."):
        assert part in shown


def test_generator_retry_with_a_failed_reflection_says_so():
    failed = Reflection("train:3#r0", "", "", "", "", "", (), Usage(), error=CallError("timeout", "no reply"))
    _, user = generator_messages(QUESTION, PLAYBOOK, retry=("0.5", reflection_text(failed)))
    assert tag_content(user.content, "previous_attempt") == "0.5"
    assert tag_content(user.content, "reflection") == NO_REFLECTION


def test_generator_shows_an_empty_playbook_as_a_sentence():
    _, user = generator_messages(QUESTION, "")
    assert tag_content(user.content, "playbook") == EMPTY_PLAYBOOK


def test_reflector_with_ground_truth_carries_every_input():
    cited = cited_bullets_text([Bullet("form-00001", "formulas_and_calculations", "Current ratio = CA / CL.", 3, 1)])
    system, user = reflector_messages(rollout(), cited, ground_truth="2.0")
    assert system.content == REFLECTOR_SYSTEM_PROMPT
    text = user.content
    assert tag_content(text, "question") == QUESTION
    assert tag_content(text, "model_reasoning") == "liabilities / assets = 0.5"
    assert tag_content(text, "model_answer") == "0.5"
    assert tag_content(text, "cited_bullets") == "[form-00001] helpful=3 harmful=1 :: Current ratio = CA / CL."
    assert tag_content(text, "feedback") == "Your answer 0.50 does not match the expected 2.00."
    assert tag_content(text, "ground_truth") == "2.0"
    assert "incorrect, score 0.00" in text


def test_reflector_without_ground_truth_omits_the_tag_and_switches_prompt():
    system, user = reflector_messages(rollout(answer=None, reasoning="", error=CallError("timeout", "no reply")), "", ground_truth=None)
    assert system.content == REFLECTOR_NO_GROUND_TRUTH_SYSTEM_PROMPT != REFLECTOR_SYSTEM_PROMPT
    assert "<ground_truth>" not in user.content and "</ground_truth>" not in user.content
    assert tag_content(user.content, "model_answer") == "(no answer)"
    assert tag_content(user.content, "cited_bullets") == "(no playbook entries were cited)"
    assert "no usable answer (timeout: no reply)" in user.content


def test_cited_bullet_lines_are_the_playbooks_own_lines():
    playbook, report = Playbook.empty().apply(
        Delta(ops=(Op(OpKind.ADD, "formulas_and_calculations", "ROI = gain / cost"), Op(OpKind.ADD, "other", "Check units.")))
    )
    assert not report.rejected
    rendered_lines = set(playbook.render().splitlines())
    for line in cited_bullets_text(playbook.bullets()).splitlines():
        assert line in rendered_lines


def test_curator_message_has_one_reflection_json_per_line():
    reflections = [reflection("train:1#r0", "first\ninsight"), reflection("train:2#r1", 'say "two"')]
    system, user = curator_messages(PLAYBOOK, "stats here", reflections)
    assert "UPDATE" in system.content and "REMOVE" in system.content
    assert tag_content(user.content, "playbook") == PLAYBOOK
    assert tag_content(user.content, "playbook_stats") == "stats here"
    lines = tag_content(user.content, "reflections").split("\n")
    records = [orjson.loads(line) for line in lines]
    assert [record["rollout_id"] for record in records] == ["train:1#r0", "train:2#r1"]
    assert records[0]["key_insight"] == "first\ninsight" and records[1]["key_insight"] == 'say "two"'
    assert all(
        set(record) == {"rollout_id", "error_identification", "root_cause", "correct_approach", "key_insight"}
        for record in records
    )


def test_curator_shows_an_empty_playbook_as_room_for_every_lesson():
    """Not the generator's "(the playbook is empty)": a 0.5B curator read that as "no lessons are new"."""
    _, user = curator_messages("", playbook_stats_text([]), [reflection("train:1#r0", "ROI = gain / cost")])
    assert tag_content(user.content, "playbook") == NO_ENTRIES_YET
    assert tag_content(user.content, "playbook_stats") == NO_ENTRIES_YET
    assert EMPTY_PLAYBOOK not in user.content


def test_reducer_shows_an_empty_playbook_as_room_for_every_lesson():
    """Not "(the playbook is empty)": a 0.5B reducer read that as "no operations were made" and kept none."""
    _, user = reducer_messages("", [[Op(OpKind.ADD, "other", "Check units.")]])
    assert tag_content(user.content, "playbook") == REDUCER_NO_ENTRIES_YET
    assert EMPTY_PLAYBOOK not in user.content


def test_reducer_message_has_one_proposal_json_per_line_with_op_references():
    proposals = [
        [Op(OpKind.ADD, "other", "Check units."), Op(OpKind.TAG, bullet_id="form-00001", helpful=1)],
        [Op(OpKind.UPDATE, "common_mistakes", "Percent as decimal.", "mist-00002"), Op(OpKind.REMOVE, bullet_id="form-00001")],
    ]
    system, user = reducer_messages(PLAYBOOK, proposals)
    assert "specific" in system.content
    assert tag_content(user.content, "playbook") == PLAYBOOK
    records = [orjson.loads(line) for line in tag_content(user.content, "proposals").split("\n")]
    assert records == [
        {"proposal": 1, "operations": [{"ref": "P1.1", "type": "ADD", "section": "other", "content": "Check units.", "bullet_id": ""}]},
        {
            "proposal": 2,
            "operations": [
                {"ref": "P2.1", "type": "UPDATE", "section": "common_mistakes", "content": "Percent as decimal.", "bullet_id": "mist-00002"},
                {"ref": "P2.2", "type": "REMOVE", "section": "", "content": "", "bullet_id": "form-00001"},
            ],
        },
    ]


def test_playbook_stats_lists_top_helpful_problematic_and_unused():
    bullets = [
        Bullet("a-1", "other", "one", helpful=5, harmful=1),
        Bullet("a-2", "other", "two", helpful=9, harmful=0),
        Bullet("a-3", "other", "three", helpful=1, harmful=4),
        Bullet("a-4", "other", "four", helpful=0, harmful=1),
        Bullet("a-5", "other", "five", created_version=7),
        Bullet("a-6", "other", "six " * 100, created_version=2),
        Bullet("a-7", "other", "seven", helpful=2, harmful=2),
    ]
    text = playbook_stats_text(bullets, top=2)
    lines = text.split("\n")
    assert lines[0] == "7 entries: 4 tagged helpful at least once, 2 problematic (harmful > helpful), 2 never tagged"
    helpful = lines[lines.index("Most helpful (top 2):") + 1 : lines.index("Problematic (top 2):")]
    problematic = lines[lines.index("Problematic (top 2):") + 1 : lines.index("Unused (oldest 2):")]
    unused = lines[lines.index("Unused (oldest 2):") + 1 :]
    assert [line.split("]")[0] for line in helpful] == ["[a-2", "[a-1"]
    assert [line.split("]")[0] for line in problematic] == ["[a-3", "[a-4"]
    assert [line.split("]")[0] for line in unused] == ["[a-6", "[a-5"]
    assert len(unused[0]) < 200 and unused[0].endswith("...")
    assert playbook_stats_text([]) == NO_ENTRIES_YET
    assert "(none)" in playbook_stats_text([Bullet("b-1", "other", "x")])


def test_fill_drops_only_lines_holding_an_empty_placeholder():
    template = "a\n$opt\n  ${opt}  \nb $opt c\n$value"
    assert fill(template, opt="", value="$x {y}") == "a\nb  c\n$x {y}"
