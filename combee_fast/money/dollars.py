"""Dollars: what a run's calls cost at the prices of the endpoints that served them.

A price is per endpoint (``[endpoints.<role | pool | default>]`` ``price_in``/``price_out``, or
``--price [ROLE=]IN/OUT``), in dollars per million prompt and completion tokens; each role is
priced by the endpoint that serves it (:meth:`~combee_fast.config.SessionConfig.endpoint_for`).
A role whose endpoint has no price has an *unknown* cost (``None``), shown as such and never as
$0.00; a total over roles is unknown as soon as one role that made calls is.

The dollars of a ledger row are its step's tokens per role priced so; a run's are the sum over
its learning steps, the scope of its ``tokens``. Dollars per accepted improvement divide them by
the accepted candidates (:mod:`combee_fast.money.improvements`), as tokens per improvement does.
The loop's own validation calls (the score after each round, on the validation split) are
counted apart: ``validation_tokens`` and ``validation_dollars`` (:func:`validation_summary`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from combee_fast.config import SessionConfig
from combee_fast.roles.spec import Role

PER_TOKENS = 1_000_000
"""Prices are dollars per this many tokens."""

UNKNOWN = "unknown (no price)"
"""How an unknown cost is shown."""


class Price(msgspec.Struct, frozen=True):
    """An endpoint's price: dollars per million prompt tokens (``price_in``) and completion tokens."""

    price_in: float
    price_out: float

    def dollars(self, prompt_tokens: int, completion_tokens: int) -> float:
        """What ``prompt_tokens`` in and ``completion_tokens`` out cost."""
        return (prompt_tokens * self.price_in + completion_tokens * self.price_out) / PER_TOKENS


Prices = Mapping[str, Price | None]
"""Each role's price, by the name its requests carry (None: its endpoint has none)."""


def role_prices(config: SessionConfig, roles: Iterable[Role]) -> dict[str, Price | None]:
    """The price of each of ``roles``: its endpoint's (the first of its lookup keys with an
    endpoint, else the default), None when that endpoint has no price."""
    prices: dict[str, Price | None] = {}
    for role in roles:
        spec = config.endpoint_for(*role.lookup_keys)
        prices[role.key] = None if spec.price_in is None or spec.price_out is None else \
            Price(spec.price_in, spec.price_out)
    return prices


def role_dollars(prices: Prices, prompt: Mapping[str, int], completion: Mapping[str, int]) -> dict[str, float | None]:
    """Dollars per role of the roles with tokens in ``prompt``/``completion`` (None: unpriced)."""
    spent: dict[str, float | None] = {}
    for role in dict.fromkeys([*prompt, *completion]):
        price = prices.get(role)
        spent[role] = None if price is None else price.dollars(prompt.get(role, 0), completion.get(role, 0))
    return spent


def add_dollars(into: dict[str, float | None], more: Mapping[str, float | None]) -> None:
    """Add ``more`` to ``into`` role by role (unknown stays unknown)."""
    for role, dollars in more.items():
        before = into.get(role, 0.0)
        into[role] = None if before is None or dollars is None else before + dollars


def total(by_role: Mapping[str, float | None]) -> float | None:
    """The sum over roles; None when any role's cost is unknown."""
    values = list(by_role.values())
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def money(dollars: float | None) -> str:
    """``$1.23`` from a dollar up (and zero), ``$0.0042`` below, ``$0.000042`` below a hundredth
    of a cent, ``<$0.000001`` below that; :data:`UNKNOWN` for None."""
    if dollars is None:
        return UNKNOWN
    if dollars >= 1 or dollars == 0:
        return f"${dollars:,.2f}"
    if dollars >= 1e-4:
        return f"${dollars:.4f}"
    return f"${dollars:.6f}" if dollars >= 1e-6 else "<$0.000001"


def dollar_summary(by_role: Mapping[str, float | None], accepted: int) -> dict[str, Any]:
    """The summary's dollar fields: ``dollars`` (None: unknown), ``dollars_by_role`` and
    ``dollars_per_improvement`` (None: unknown, or no candidate accepted)."""
    spent = total(by_role)
    return {"dollars": None if spent is None else round(spent, 6),
            "dollars_by_role": {role: None if d is None else round(d, 6) for role, d in by_role.items()},
            "dollars_per_improvement": None if spent is None or not accepted else round(spent / accepted, 6)}


def validation_summary(prices: Prices, prompt: Mapping[str, int], completion: Mapping[str, int]) -> dict[str, Any]:
    """The summary's fields for the loop's own validation calls, whose tokens per role are
    ``prompt`` and ``completion``: ``validation_tokens`` and ``validation_dollars`` (None: a role
    that made such calls has no price). Not in ``tokens`` and ``dollars``, which are the learning
    steps'."""
    spent = total(role_dollars(prices, prompt, completion))
    return {"validation_tokens": sum(prompt.values()) + sum(completion.values()),
            "validation_dollars": None if spent is None else round(spent, 6)}


def validation_line(summary: Mapping[str, Any]) -> str:
    """The report's sentence on :func:`validation_summary`'s fields of a run's ``summary`` ("" when
    the loop made no validation call)."""
    tokens = summary.get("validation_tokens") or 0
    return (f"The loop's own validation calls, not in the table: {tokens:,} tokens, "
            f"{money(summary.get('validation_dollars'))}." if tokens else "")
