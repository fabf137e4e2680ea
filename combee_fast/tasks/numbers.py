"""Reading a number out of a model's answer text, exactly (as a Decimal).

Accepted: plain numbers (``-3.2``, ``.5``, ``2.``, ``1.2e3``), thousands separators
(``1,234.5``), currency and percent signs (``$1,234.5``, ``-$3``, ``12%``), the Unicode minus, and
surrounding words (``"The answer is 2.51 dollars."``). When the text holds several numbers the
first is taken: answers are asked to start with the value. ``12%`` reads as 12, not 0.12; callers
that care can check :attr:`ParsedNumber.percent`.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import NamedTuple

_NUMBER = re.compile(
    r"(?P<sign>[-+])?\s*\$?\s*"
    r"(?P<digits>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)"
    r"(?P<exp>[eE][-+]?\d+)?"
    r"(?P<percent>\s*%)?"
)
_MAX_MAGNITUDE = 300  # decimal exponent bound: larger values are not answers, and are not parsed
_EXACT = Context(prec=_MAX_MAGNITUDE + 50)


class ParsedNumber(NamedTuple):
    value: Decimal
    percent: bool


def parse_number(text: str | None) -> ParsedNumber | None:
    """The first number in ``text`` or ``None`` when there is none."""
    if not text:
        return None
    normalised = text.replace("\u2212", "-").replace("$-", "-$")
    match = _NUMBER.search(normalised)
    if match is None:
        return None
    literal = (match["sign"] or "") + match["digits"].replace(",", "") + (match["exp"] or "")
    try:
        value = Decimal(literal)
    except InvalidOperation:  # pragma: no cover - the pattern only admits valid literals
        return None
    if value and abs(value.adjusted()) > _MAX_MAGNITUDE:
        return None
    return ParsedNumber(value, match["percent"] is not None)


def round_decimal(value: Decimal, decimals: int) -> Decimal:
    """``value`` rounded half away from zero to ``decimals`` places (2.505 -> 2.51)."""
    return value.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP, context=_EXACT)
