"""Number reading and numeric scoring, including properties over generated numbers."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from combee_fast.tasks.numbers import parse_number, round_decimal
from combee_fast.tasks.scorers import NumericScorer

amounts = st.decimals(min_value=Decimal("-1e12"), max_value=Decimal("1e12"), places=4, allow_nan=False)


@given(amounts, st.sampled_from(["{}", "${}", "{} dollars", "The answer is {}.", "  {}\n", "~{} (rounded)"]))
def test_a_number_written_plainly_or_with_words_reads_back_exactly(value, pattern):
    parsed = parse_number(pattern.format(format(value, "f")))
    assert parsed is not None and parsed.value == value and not parsed.percent


@given(amounts)
def test_thousands_separators_and_currency_read_back_exactly(value):
    text = f"${value:,.4f}" if value >= 0 else f"-${-value:,.4f}"
    parsed = parse_number(text)
    assert parsed is not None and parsed.value == value


@given(amounts)
def test_an_answer_rounded_to_two_decimals_always_scores_one(value):
    scorer = NumericScorer(decimals=2)
    assert scorer.score(format(round_decimal(value, 2), "f"), format(value, "f")).value == 1.0


def test_texts_without_a_usable_number():
    assert parse_number("no idea") is None
    assert parse_number("") is None and parse_number(None) is None
    assert parse_number("1e400") is None  # not an answer, and too large to round exactly
    assert parse_number("12 %") == (Decimal(12), True)
