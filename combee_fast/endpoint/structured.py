"""Turning a completion's text into the JSON object a request asked for.

Servers that honour ``response_format`` return bare JSON; others wrap it in prose or a Markdown
code fence, so :func:`extract_json` also accepts the outermost ``{...}`` of the text.
:func:`schema_problem` checks the declared top-level shape only (type, required properties and
the types of present properties); the roles validate meaning.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from combee_fast.schema import CallError, ErrorKind, Message

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def extract_json(text: str) -> Any:
    """The JSON value in ``text``: the whole text, else its outermost ``{...}``.

    Control characters inside strings (raw newlines, which llama.cpp's JSON grammar lets through)
    are accepted. Raises ``ValueError`` naming the problem when neither parses.
    """
    start, end = text.find("{"), text.rfind("}")
    candidates = [text] + ([text[start : end + 1]] if start != -1 and end > start else [])
    first_error: Exception | None = None
    for candidate in candidates:
        try:
            return msgspec.json.decode(candidate)
        except msgspec.DecodeError as exc:
            first_error = first_error or exc
        try:
            return json.loads(candidate, strict=False)
        except ValueError:
            continue
    if len(candidates) == 1:
        raise ValueError(f"not JSON and no {{...}} object in the text ({first_error})")
    raise ValueError(f"not valid JSON: {first_error}")


def _has_type(value: Any, type_name: str) -> bool:
    if type_name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _JSON_TYPES.get(type_name, (object,)))


def _type_ok(value: Any, declared: str | list[str] | None) -> bool:
    if declared is None:
        return True
    names = [declared] if isinstance(declared, str) else declared
    return any(_has_type(value, name) for name in names)


def schema_problem(data: Any, schema: dict[str, Any]) -> str | None:
    """Why ``data`` does not have the shape ``schema`` declares at the top level; ``None`` if it does."""
    if not _type_ok(data, schema.get("type")):
        return f"expected a JSON {schema.get('type')}, got {type(data).__name__}"
    if not isinstance(data, dict):
        return None
    missing = [name for name in schema.get("required", ()) if name not in data]
    if missing:
        return f"missing required properties: {', '.join(missing)}"
    for name, sub in schema.get("properties", {}).items():
        if name in data and isinstance(sub, dict) and not _type_ok(data[name], sub.get("type")):
            return f"property {name!r}: expected {sub.get('type')}, got {type(data[name]).__name__}"
    return None


def parse_structured(text: str | None, finish_reason: str | None,
                     schema: dict[str, Any]) -> tuple[Any, CallError | None]:
    """``(data, None)`` when ``text`` holds an object matching ``schema``, else ``(None, error)``.

    The error kind is ``truncated`` when the server stopped at ``max_tokens``, ``malformed_json``
    when the text is not JSON, ``schema_mismatch`` when it is JSON of the wrong shape.
    """
    if text is None:
        return None, CallError(kind="malformed_json", message="the response has no content")
    try:
        data = extract_json(text)
    except ValueError as exc:
        kind: ErrorKind = "truncated" if finish_reason == "length" else "malformed_json"
        return None, CallError(kind=kind, message=str(exc), raw=text)
    problem = schema_problem(data, schema)
    if problem is not None:
        return None, CallError(kind="schema_mismatch", message=problem, raw=text)
    return data, None


def repair_messages(messages: tuple[Message, ...], bad_text: str | None,
                    error: CallError) -> tuple[Message, ...]:
    """The conversation for the one repair request: the bad answer and what was wrong with it."""
    instruction = (
        f"Your previous reply could not be used ({error.kind}: {error.message}). "
        "Reply again with only one JSON object that matches the requested schema, and no other text."
    )
    return (*messages, Message(role="assistant", content=bad_text or ""),
            Message(role="user", content=instruction))
