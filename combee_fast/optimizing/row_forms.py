"""How ``optimize`` writes a user's row: as JSON (what pins a split), as text (what a prompt and a
reflection show of it), and a record's named inputs as a reflective record shows them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson


def row_json(row: Any) -> bytes:
    """``row`` as JSON: keys sorted, anything JSON cannot hold written as its ``str``."""
    return orjson.dumps(row, default=str, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def row_text(row: Any) -> str:
    """What a prompt shows of ``row``: a string as it is, a mapping's string ``input`` (gepa's
    rows), else the row as JSON."""
    if isinstance(row, str):
        return row
    if isinstance(row, dict) and isinstance(row.get("input"), str):
        return str(row["input"])
    return row_json(row).decode()


def inputs_text(inputs: Mapping[str, Any]) -> Any:
    """A row's named inputs as a reflective record shows them (MLflow's, DSPy's): the one input's
    value alone, else all of them."""
    return next(iter(inputs.values())) if len(inputs) == 1 else dict(inputs)
