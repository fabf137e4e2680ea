"""tau2-bench's scoring of one episode, as its reference (sierra-research/tau2-bench) does it.

- **Database**: the final database state is the initial one with the agent's tool calls replayed
  in order (the calls the server logged, so exactly what it ran); the expected one is the initial
  one with the task's gold actions replayed on a fresh copy. They must be equal.
- **Communication**: each of the task's ``communicate_info`` strings must appear in some message
  the agent sent the customer (case-insensitive, commas ignored).

The reward is 1 only when both hold, else 0. The feedback names what differed: each table, record
and field path whose values differ (expected against got, at most :data:`MAX_DIFFERENCES`), and
each missing string. A gold or agent call the tool refuses changes nothing (as on the server).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from combee_fast.tasks.base import Score
from combee_fast.tasks.tau2.domain import Domain, Tau2Task

MAX_DIFFERENCES = 6
"""Differences the feedback names (more are counted)."""

VALUE_CHARS = 80


def replay(domain: Domain, calls: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The database reached from a fresh copy by running ``calls`` (name, arguments) in order;
    a call the tool refuses (raises) changes nothing but what it changed before refusing."""
    db = domain.fresh_db()
    for name, arguments in calls:
        try:
            domain.run_tool(db, name, arguments)
        except Exception:  # a refused call: the server answers it as an error, and so does this
            pass
    return db


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 3] + "..."


def _walk(path: str, expected: Any, got: Any, out: list[str]) -> None:
    if expected == got:
        return
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in dict.fromkeys([*expected, *got]):
            if key not in got:
                out.append(f"{path}[{key!r}]: expected {_shown(expected[key])}, missing")
            elif key not in expected:
                out.append(f"{path}[{key!r}]: not expected, got {_shown(got[key])}")
            else:
                _walk(f"{path}[{key!r}]", expected[key], got[key], out)
        return
    if isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        for index, (e, g) in enumerate(zip(expected, got)):
            _walk(f"{path}[{index}]", e, g, out)
        return
    out.append(f"{path}: expected {_shown(expected)}, got {_shown(got)}")


def db_differences(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """Every field path (``table[record]...``) where ``got`` differs from ``expected``."""
    out: list[str] = []
    for table in dict.fromkeys([*expected, *got]):
        _walk(table, expected.get(table), got.get(table), out)
    return out


def missing_info(required: Sequence[str], messages: Sequence[str]) -> list[str]:
    """The ``required`` strings no message holds (case-insensitive, commas ignored)."""
    said = [message.lower().replace(",", "") for message in messages]
    return [info for info in required if not any(info.lower() in text for text in said)]


def grade(domain: Domain, task: Tau2Task, agent_calls: Sequence[tuple[str, dict[str, Any]]],
          agent_messages: Sequence[str]) -> Score:
    """The tau2 score of an episode (module docstring): the agent's tool calls in order and its
    messages to the customer."""
    criteria = task.evaluation_criteria
    gold = [(action.name, action.arguments) for action in (criteria.actions or [])] if criteria else []
    expected = replay(domain, gold)
    got = replay(domain, agent_calls)
    differences = db_differences(expected, got) if expected != got else []
    missing = missing_info(criteria.communicate_info or [] if criteria else [], agent_messages)
    if not differences and not missing:
        return Score(1.0, "the final database matches the expected one and every required fact was told")
    parts = []
    if differences:
        shown = "; ".join(differences[:MAX_DIFFERENCES])
        more = f" (and {len(differences) - MAX_DIFFERENCES} more)" if len(differences) > MAX_DIFFERENCES else ""
        parts.append(f"the final database differs from the expected one: {shown}{more}")
    if missing:
        parts.append("the customer was never told: " + "; ".join(repr(info) for info in missing))
    return Score(0.0, ". ".join(parts))
