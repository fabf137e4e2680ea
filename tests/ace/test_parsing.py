"""Role output parsing: good output in every shape real models produce, typed errors for the rest."""

from __future__ import annotations


import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from combee_fast.ace.playbook import Playbook
from combee_fast.ace.curator import CURATOR_SCHEMA, parse_curator
from combee_fast.ace.generator import GENERATOR_SCHEMA, GeneratorOutput, parse_generator
from combee_fast.ace.reducer import REDUCER_SCHEMA
from combee_fast.ace.reflector import REFLECTOR_SCHEMA, parse_reflector
from combee_fast.roles.base import decode_json_object
from combee_fast.schema import CallError, Usage
from combee_fast.ace.records import BulletTag, Delta, Op, OpKind, Reflection

GOOD_GENERATOR = {"reasoning": "CA / CL = 2", "bullet_ids": ["form-00001"], "final_answer": "2.00"}


def test_a_bare_number_as_final_answer_is_read_as_its_json_text():
    assert parse_generator(None, '{"reasoning": "r", "bullet_ids": [], "final_answer": 2.5}').final_answer == "2.5"
    assert parse_generator({**GOOD_GENERATOR, "final_answer": 7}, None).final_answer == "7"
GOOD_REFLECTOR = {
    "reasoning": "r",
    "error_identification": "e",
    "root_cause": "c",
    "correct_approach": "a",
    "key_insight": "k",
    "bullet_tags": [{"id": "form-00001", "tag": "helpful"}, {"id": "mist-00002", "tag": "harmful"}],
}
USAGE = Usage(role="reflector", model="m", prompt_tokens=10)


def shapes(obj: dict) -> list[tuple[object, str]]:
    """(data, text) pairs as endpoints deliver the same object."""
    body = orjson.dumps(obj).decode()
    pretty = orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode()
    return [
        (obj, body),
        (None, body),
        (None, f"  {pretty}\n"),
        (None, f"```json\n{pretty}\n```"),
        (None, f"```\n{body}\n```"),
        (None, f"Here is my answer:\n```json\n{pretty}\n```\nHope this helps."),
        (None, f"Thinking... the set {{a, b}} matters.\nFinal: {body} -- done"),
    ]


@pytest.mark.parametrize(("data", "text"), shapes(GOOD_GENERATOR))
def test_generator_accepts_good_output_in_every_shape(data, text):
    assert parse_generator(data, text) == GeneratorOutput("CA / CL = 2", ("form-00001",), "2.00")


def test_generator_cleans_bullet_ids_and_answer():
    output = parse_generator({**GOOD_GENERATOR, "bullet_ids": ["[form-00001]", " form-00001", "", "mist-00002"], "final_answer": " 2.00\n"}, None)
    assert output == GeneratorOutput("CA / CL = 2", ("form-00001", "mist-00002"), "2.00")


@pytest.mark.parametrize(
    ("data", "text", "kind", "words"),
    [
        (None, '{"reasoning": "x", "bullet_ids": [], "final_answer": "2",}', "malformed_json", "invalid JSON"),
        (None, "{'reasoning': 'x', 'bullet_ids': [], 'final_answer': '2'}", "malformed_json", "invalid JSON"),
        (None, '{"reasoning": "x", "bullet_ids": ["form-00001"], "final_ans', "truncated", "cut off"),
        (None, '```json\n{"reasoning": "x", "bullet_ids": [\n```', "truncated", "cut off"),
        (None, "The answer is 2.00", "malformed_json", "no JSON object"),
        (None, "", "malformed_json", "empty response"),
        (None, None, "malformed_json", "empty response"),
        (None, '["2.00"]', "schema_mismatch", "expected a JSON object, got array"),
        (["2.00"], '["2.00"]', "schema_mismatch", "expected a JSON object, got array"),
        ({"reasoning": "x", "bullet_ids": []}, None, "schema_mismatch", "missing required field `final_answer`"),
        ({**GOOD_GENERATOR, "final_answer": [2.0]}, None, "schema_mismatch", "`$.final_answer`"),
        ({**GOOD_GENERATOR, "bullet_ids": "form-00001"}, None, "schema_mismatch", "`$.bullet_ids`"),
        ({**GOOD_GENERATOR, "bullet_ids": [1]}, None, "schema_mismatch", "`$.bullet_ids[0]`"),
    ],
)
def test_generator_returns_typed_errors_keeping_the_raw_text(data, text, kind, words):
    error = parse_generator(data, text)
    assert isinstance(error, CallError)
    assert error.kind == kind and words in error.message
    assert error.raw == text


def test_in_prose_the_first_decodable_object_wins_and_extra_keys_are_ignored():
    text = 'Not this: {broken} but {"x": [1, 2]} and then {"reasoning": "r", "bullet_ids": [], "final_answer": "3"}'
    assert decode_json_object(None, text) == {"x": [1, 2]}
    error = parse_generator(None, text)
    assert isinstance(error, CallError) and error.kind == "schema_mismatch"
    assert parse_generator({**GOOD_GENERATOR, "confidence": 0.9}, None) == parse_generator(GOOD_GENERATOR, None)


@pytest.mark.parametrize(("data", "text"), shapes(GOOD_REFLECTOR))
def test_reflector_accepts_good_output_in_every_shape(data, text):
    reflection = parse_reflector(data, text, rollout_id="train:3#r1", usage=USAGE)
    assert reflection == Reflection(
        rollout_id="train:3#r1",
        reasoning="r",
        error_identification="e",
        root_cause="c",
        correct_approach="a",
        key_insight="k",
        bullet_tags=(BulletTag("form-00001", "helpful"), BulletTag("mist-00002", "harmful")),
        usage=USAGE,
    )
    assert reflection.error is None


def test_reflector_normalises_tags_and_keeps_the_first_tag_per_bullet():
    data = {
        **GOOD_REFLECTOR,
        "bullet_tags": [
            {"id": "[form-00001]", "tag": " Helpful"},
            {"id": "form-00001", "tag": "harmful"},
            {"id": "mist-00002", "tag": "NEUTRAL"},
        ],
    }
    reflection = parse_reflector(data, None, rollout_id="r", usage=USAGE)
    assert reflection.bullet_tags == (BulletTag("form-00001", "helpful"), BulletTag("mist-00002", "neutral"))


@pytest.mark.parametrize(
    ("data", "text", "kind", "words"),
    [
        ({**GOOD_REFLECTOR, "bullet_tags": [{"id": "x", "tag": "great"}]}, None, "schema_mismatch", "`$.bullet_tags[0].tag`"),
        ({key: value for key, value in GOOD_REFLECTOR.items() if key != "root_cause"}, None, "schema_mismatch", "`root_cause`"),
        ({**GOOD_REFLECTOR, "key_insight": ["a", "b"]}, None, "schema_mismatch", "`$.key_insight`"),
        (None, '{"reasoning": "r", "error_identification": "e", "root_cau', "truncated", "cut off"),
        (None, "I could not decide.", "malformed_json", "no JSON object"),
    ],
)
def test_reflector_failure_is_recorded_on_the_reflection(data, text, kind, words):
    reflection = parse_reflector(data, text, rollout_id="train:3#r1", usage=USAGE)
    assert reflection.error is not None and reflection.error.kind == kind and words in reflection.error.message
    assert (reflection.rollout_id, reflection.usage, reflection.bullet_tags, reflection.key_insight) == ("train:3#r1", USAGE, (), "")
    assert reflection.error.raw == text


def ops_reply(*operations: dict) -> dict:
    return {"reasoning": "because", "operations": list(operations)}


@pytest.mark.parametrize(
    ("data", "text"),
    shapes(
        ops_reply(
            {"type": "ADD", "section": "formulas_and_calculations", "content": "ROI = gain / cost", "bullet_id": ""},
            {"type": "UPDATE", "section": "common_mistakes", "content": "Give ratios as decimals.", "bullet_id": "mist-00002"},
            {"type": "REMOVE", "section": "other", "content": "", "bullet_id": "othe-00003"},
        )
    ),
)
def test_ops_accept_good_output_in_every_shape(data, text):
    assert parse_curator(data, text) == (
        Op(OpKind.ADD, "formulas_and_calculations", "ROI = gain / cost"),
        Op(OpKind.UPDATE, "common_mistakes", "Give ratios as decimals.", "mist-00002"),
        Op(OpKind.REMOVE, "other", "", "othe-00003"),
    )


def test_ops_are_normalised_to_what_the_playbook_stores():
    ops = parse_curator(
        ops_reply(
            {"type": "add", "section": " Common Mistakes ", "content": "  Check\n  the   units.\t", "bullet_id": "form-00001"},
            {"type": "Update", "section": "formulas & calculations", "content": "x", "bullet_id": "[form-00001]"},
            {"type": "REMOVE", "section": "", "content": "why it goes", "bullet_id": " mist-00002 "},
        ),
        None,
    )
    assert ops == (
        Op(OpKind.ADD, "common_mistakes", "Check the units."),
        Op(OpKind.UPDATE, "formulas_calculations", "x", "form-00001"),
        Op(OpKind.REMOVE, "", "", "mist-00002"),
    )


def test_unusable_ops_are_dropped_and_invalid_ones_left_for_the_playbook_to_reject():
    ops = parse_curator(
        ops_reply(
            {"type": "MERGE", "section": "other", "content": "x", "bullet_id": ""},
            "ADD something",
            {"type": "ADD", "section": "other", "content": 5, "bullet_id": ""},
            {"type": "TAG", "bullet_id": "form-00001"},
            {"type": "ADD", "section": "other", "content": "Keep me."},
            {"type": "UPDATE", "section": "other", "content": "no id", "bullet_id": ""},
            {"type": "REMOVE", "bullet_id": "nope-00099"},
        ),
        None,
    )
    assert ops == (
        Op(OpKind.ADD, "other", "Keep me."),
        Op(OpKind.UPDATE, "other", "no id", None),
        Op(OpKind.REMOVE, "", "", "nope-00099"),
    )
    playbook, report = Playbook.empty().apply(Delta(ops=ops))
    assert [bullet.content for bullet in playbook.bullets()] == ["Keep me."]
    assert len(report.rejected) == 2 and all(rejected.reason for rejected in report.rejected)


@pytest.mark.parametrize(
    ("data", "text", "kind", "words"),
    [
        (ops_reply({"type": "MERGE"}, {"type": "ADD", "content": ["x"]}), None, "schema_mismatch", "no usable operation: operations[0]: unknown type 'MERGE'"),
        ({"reasoning": "r"}, None, "schema_mismatch", "missing required field `operations`"),
        ({"operations": []}, None, "schema_mismatch", "missing required field `reasoning`"),
        ({"reasoning": "r", "operations": {"type": "ADD"}}, None, "schema_mismatch", "`$.operations`"),
        (None, '{"reasoning": "r", "operations": [{"type": "ADD", "content": "x"},]}', "malformed_json", "invalid JSON"),
        (None, '{"reasoning": "r", "operations": [{"type": "ADD", "content": "unfinished', "truncated", "cut off"),
    ],
)
def test_ops_errors_are_typed(data, text, kind, words):
    error = parse_curator(data, text)
    assert isinstance(error, CallError) and error.kind == kind and words in error.message and error.raw == text


def test_an_empty_operations_list_means_no_change():
    assert parse_curator(None, '{"reasoning": "nothing new", "operations": []}') == ()


@pytest.mark.parametrize(
    ("schema", "keys"),
    [
        (GENERATOR_SCHEMA, set(GOOD_GENERATOR)),
        (REFLECTOR_SCHEMA, set(GOOD_REFLECTOR)),
        (CURATOR_SCHEMA, {"reasoning", "operations"}),
        (REDUCER_SCHEMA, {"reasoning", "keep", "operations"}),
    ],
)
def test_schemas_require_every_key_the_parsers_read(schema, keys):
    assert set(schema["properties"]) == keys and set(schema["required"]) == keys
    assert schema["additionalProperties"] is False


prose = st.text(alphabet=st.characters(blacklist_characters="{}`", blacklist_categories=("Cs",)), max_size=40)
json_objects = st.dictionaries(st.text(max_size=8), st.one_of(st.text(max_size=20), st.integers(-(2**53), 2**53), st.lists(st.text(max_size=5), max_size=3)), min_size=1, max_size=5)


@given(json_objects, prose, prose, st.booleans())
def test_any_object_in_prose_or_fences_decodes_back(obj, before, after, fenced):
    body = orjson.dumps(obj).decode()
    text = f"{before}\n```json\n{body}\n```\n{after}" if fenced else f"{before} {body} {after}"
    assert decode_json_object(None, text) == obj


@given(json_objects, st.integers(min_value=1))
def test_any_cut_off_object_is_a_typed_error_never_a_wrong_value(obj, cut):
    body = orjson.dumps(obj).decode()
    text = body[: max(1, len(body) - cut)]
    result = decode_json_object(None, text)
    assert isinstance(result, CallError) and result.kind in ("truncated", "malformed_json") and result.raw == text


def test_placeholder_copies_are_their_own_error_kind_and_real_ops_survive() -> None:
    from combee_fast.roles.base import is_placeholder

    assert is_placeholder("<the lesson>") and is_placeholder(" <one reusable, specific lesson") and is_placeholder("<>")
    assert not is_placeholder("Use <= when the bound is inclusive") and not is_placeholder("x < y > z")
    copied = '{"reasoning": "r", "operations": [{"type": "ADD", "section": "<section>", "content": "<the lesson>"}]}'
    error = parse_curator(None, copied)
    assert isinstance(error, CallError) and error.kind == "placeholder"
    mixed = ('{"reasoning": "r", "operations": [{"type": "ADD", "section": "formulas", "content": "<the lesson>"},'
             ' {"type": "ADD", "section": "formulas", "content": "Divide by 100 before compounding"}]}')
    ops = parse_curator(None, mixed)
    assert not isinstance(ops, CallError) and [op.content for op in ops] == ["Divide by 100 before compounding"]


def test_an_operation_copying_its_roles_instructions_is_dropped_and_named() -> None:
    """The curator's and the reducer's own words are not lessons; a lesson that shares a few words
    with them is kept."""
    from combee_fast.ace.ops import parse_ops
    from combee_fast.ace.reducer import REDUCER_SYSTEM_PROMPT
    from combee_fast.roles.base import PROMPT_COPY_PROBLEM

    def reply(*contents: str) -> str:
        return orjson.dumps({"reasoning": "r", "operations": [
            {"type": "ADD", "section": "common_mistakes", "content": c, "bullet_id": ""} for c in contents]}).decode()

    principle = "Capture what is new: a lesson is new when no entry of the playbook holds it yet."
    error = parse_curator(None, reply(principle))
    assert isinstance(error, CallError) and error.kind == "placeholder" and PROMPT_COPY_PROBLEM in error.message
    assert "operations[0]" in error.message
    lesson = "A lesson on rates: convert a percentage to a fraction before you compound it."
    ops = parse_curator(None, reply(principle, lesson))
    assert not isinstance(ops, CallError) and [op.content for op in ops] == [lesson]
    rule = "Keep complementary specifics. Distinct lessons from different proposals all survive."
    assert isinstance(parse_ops(None, reply(rule), own_prompt=REDUCER_SYSTEM_PROMPT), CallError)
    assert len(parse_curator(None, reply(rule))) == 1  # the curator's prompt does not say it


def test_a_field_copied_from_the_prompt_is_found_whatever_its_case_spacing_or_full_stop() -> None:
    from combee_fast.roles.base import COPY_MIN_CHARS, copies_prompt

    prompt = "2. Name the root cause: the misunderstanding or missing knowledge behind the error, not its\n   symptom."
    assert copies_prompt("The misunderstanding or missing knowledge behind the error.", prompt)
    assert copies_prompt("behind the error, not its symptom", prompt)  # across the prompt's line break
    assert not copies_prompt("The root cause: a misread value", prompt)
    short = "the root cause"
    assert len(short) < COPY_MIN_CHARS and short in prompt.lower() and not copies_prompt(short, prompt)


def test_passages_of_the_prompt_put_together_or_slightly_changed_are_a_copy() -> None:
    """Two fields the 0.5B reflector wrote in a Combee bench run (``python bench/real_model.py``,
    stop 43): neither is one passage of the prompt, and a reducer joined them into a kept lesson."""
    from combee_fast.ace.reflector import REFLECTOR_SYSTEM_PROMPT
    from combee_fast.roles.base import copies_prompt

    for copied in ("the wrong or misapplied formula, a misread value, a unit, period or percentage slip, a rounding "
                   "or format error, a missing step",
                   'one reusable lesson that carries over to other questions of this kind. Make it concrete and '
                   'specific (for example "Dividend payout ratio = dividends / net income, not dividends / revenue") '
                   'rather than',
                   "Dividend payout ratio = dividends / net income, not dividends / revenue, a misread value, a unit, "
                   "period or percentage slip, a rounding or format error, a missing step"):
        assert copies_prompt(copied, REFLECTOR_SYSTEM_PROMPT), copied
    for own in ("Sharpe ratio = (R_p - R_f) / sigma_p: subtract the risk-free rate before dividing",
                "The model misread the cash flow of year 3 as a percentage slip of the discount rate",
                "Compare the model's answer with the correct answer only after converting percent to decimals"):
        assert not copies_prompt(own, REFLECTOR_SYSTEM_PROMPT), own


def test_a_reflection_keeps_its_own_words_and_fails_only_when_nothing_of_its_own_is_left() -> None:
    from combee_fast.ace.reflector import REFLECTOR_SYSTEM_PROMPT

    example = "Dividend payout ratio = dividends / net income, not dividends / revenue"
    assert example in " ".join(REFLECTOR_SYSTEM_PROMPT.split())
    mixed = {**GOOD_REFLECTOR, "correct_approach": "Sharpe = (R_p - R_f) / sigma_p", "key_insight": example}
    kept = parse_reflector(mixed, None, rollout_id="r", usage=USAGE)
    assert kept.error is None and kept.key_insight == "" and kept.correct_approach == "Sharpe = (R_p - R_f) / sigma_p"
    placeholder_insight = parse_reflector({**GOOD_REFLECTOR, "key_insight": "<one reusable, specific lesson>"}, None,
                                          rollout_id="r", usage=USAGE)
    assert placeholder_insight.error is None and placeholder_insight.key_insight == "" and placeholder_insight.root_cause == "c"
    nothing = {**GOOD_REFLECTOR, "error_identification": "", "root_cause": "<why it went wrong>",
               "correct_approach": "", "key_insight": example}
    failed = parse_reflector(nothing, None, rollout_id="r", usage=USAGE)
    assert failed.error is not None and failed.error.kind == "placeholder" and "root_cause '<why" in failed.error.message
    blank = parse_reflector({**GOOD_REFLECTOR, "error_identification": "", "root_cause": "", "correct_approach": "",
                             "key_insight": ""}, None, rollout_id="r", usage=USAGE)
    assert blank.error is None  # nothing copied: an empty diagnosis is the model's own (and teaches nothing)


def test_a_reply_without_an_answer_is_named_for_what_it_is() -> None:
    from combee_fast.roles.base import no_answer

    question = "Use formula Current Ratio to answer: assets 10, liabilities 5?"
    assert no_answer("2.00", role="generator", question=question) is None
    assert no_answer("  ", role="generator").kind == "no_answer"
    assert no_answer("generator", role="generator").kind == "no_answer"
    assert no_answer("gepa_solver", role="gepa_solver").message.startswith("gepa_solver: the answer is the role's name")
    assert no_answer("<the answer>", role="generator").kind == "placeholder"
    copied = no_answer(f"Question: {question}", role="generator", question=question)
    assert copied.kind == "no_answer" and "copy of the question" in copied.message
    assert no_answer("5", role="generator", question="5") is None  # a short question may be its own answer
