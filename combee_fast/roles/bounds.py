"""Bounds that make each role's JSON Schema a grammar a model cannot loop in.

A constraining server (llama.cpp, vLLM, SGLang) turns the schema into a grammar. Without bounds a
small model under greedy decoding fills an unbounded string or array until ``max_tokens``
("the answer is 2.5, the answer is 2.5, ...", or ``bullet_ids`` "1".."220"). So every
string gets a ``maxLength``, every array a ``maxItems``, and ids an ``enum`` of the ids actually
shown in the prompt (:func:`with_ids`). The bounds leave room for any sensible reply: each role's
bounded strings fit in its ``max_tokens`` at ~4 characters per token.

Bounds are only sent to the server; the roles' parsers do not reject a longer reply from a
server that does not enforce the schema.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

REASONING_CHARS = 800
"""Longest ``reasoning`` of any role. Keep every bound under 1,000: llama-cpp-python 0.3.36 unrolls
``maxLength`` into nested optional rules, and at 1,200 its grammar parser fails ("number of rules
that are going to be repeated ... exceeds sane defaults") and the server process dies."""

ANSWER_CHARS = 200
"""Longest ``final_answer`` of the generator."""

FIELD_CHARS = 500
"""Longest diagnosis field of the reflector (error identification, root cause, ...)."""

CONTENT_CHARS = 400
"""Longest bullet ``content`` (and section name) a curator or reducer may write."""

ID_CHARS = 40
"""Longest id of a context's part (an ACE bullet's), when the ids are not enumerated."""

MAX_CITED = 16
"""Most ids a reply may cite (ACE's generator's ``bullet_ids``) and most ``bullet_tags`` ACE's
reflector may give."""

MAX_OPS = 8
"""Most operations in one curator or reducer reply."""

MAX_KEEP = 64
"""Most proposal operations a reducer may keep."""

def text(max_chars: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_chars}


def array(items: dict[str, Any], max_items: int) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": max_items}


def id_schema(ids: Iterable[str]) -> dict[str, Any]:
    """A string that is one of ``ids`` (``""`` among them for an ADD without an id); any bounded
    string when there is none."""
    values = list(dict.fromkeys(ids))
    return {"type": "string", "enum": values} if values else text(ID_CHARS)


def with_ids(schema: dict[str, Any], path: tuple[str, ...], ids: Iterable[str]) -> dict[str, Any]:
    """A copy of ``schema`` whose id string at ``path`` (property names; ``*`` for an array's
    items) may only be one of ``ids``; an array of ids with nothing to cite gets ``maxItems`` 0.
    Every object on ``path`` (and its ``properties``) is a new dict, the rest is shared with
    ``schema``: change the copy only along ``path``."""
    ids = tuple(ids)
    result = dict(schema)
    node = result
    for key in path[:-1]:
        if key == "*":
            node["items"] = node = dict(node["items"])
        else:
            node["properties"] = properties = dict(node["properties"])
            properties[key] = node = dict(properties[key])
    last = path[-1]
    if last == "*":
        if not ids:
            node["maxItems"] = 0
        node["items"] = id_schema(ids)
    else:
        node["properties"] = {**node["properties"], last: id_schema(ids)}
    return result
