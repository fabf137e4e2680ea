"""What every role's calls share: prompt files, template filling, reading JSON out of model output.

Each learner keeps its roles' prompts in a ``prompts/`` folder beside its modules (ACE's in
``ace/prompts/``): ``<role>.txt`` is the system message and ``<role>_user.txt`` the user-message
template, read by :func:`load_prompt`. Templates use ``$name`` placeholders (:class:`string.Template`); a line
holding only a placeholder whose value is empty is dropped, which is how optional blocks (retry,
ground truth) disappear. Substituted values are never re-read as templates.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from string import Template
from typing import Any, TypeVar

import msgspec

from combee_fast.schema import CallError

_PLACEHOLDER_LINE = re.compile(r"\$(?:(\w+)|\{(\w+)\})")
_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n?(.*?)```", re.DOTALL)
_MAX_OBJECT_STARTS = 64  # how many top-level '{' of a prose reply are tried as JSON starts
_json_decoder = json.JSONDecoder(strict=False)  # raw newlines/tabs inside strings are accepted

T = TypeVar("T")


def load_prompt(name: str, *, beside: str) -> str:
    """The text of ``prompts/<name>`` in the folder of the module ``beside`` (its ``__file__``),
    without its final newline."""
    return (Path(beside).parent / "prompts" / name).read_text(encoding="utf-8").rstrip("\n")


def fill(template: str, **values: str) -> str:
    """Substitute ``$name`` placeholders; drop lines that hold only a placeholder with an empty value."""
    kept = []
    for line in template.split("\n"):
        match = _PLACEHOLDER_LINE.fullmatch(line.strip())
        if match is not None and values.get(match[1] or match[2]) == "":
            continue
        kept.append(line)
    return Template("\n".join(kept)).substitute(values)


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) collapsed to one space, trimmed."""
    return " ".join(text.split())


_PLACEHOLDER = re.compile(r"<[^<>]*>?")
PLACEHOLDER_PROBLEM = "a copy of the prompt's placeholder, not content"


def is_placeholder(text: str) -> bool:
    """True when ``text`` is a copy of a prompt slot such as ``<the lesson>`` (or one cut before
    its ``>``) rather than content: small models copy the reply format's examples verbatim."""
    return _PLACEHOLDER.fullmatch(text.strip()) is not None


_WORD = re.compile(r"\w+")

COPY_MIN_CHARS = 20
"""Shortest text taken for a copy when found verbatim elsewhere: a reply field in its role's prompt
(:func:`copies_prompt`), a question in an answer (:func:`no_answer`)."""
PROMPT_COPY_PROBLEM = "a copy of the role's own instructions, not content"


COPY_SHINGLE_WORDS = 4
"""Words in a row that, found in a role's prompt, count as copied from it (:func:`copies_prompt`)."""

COPY_COVERED = 0.8
"""Share of a text's words inside such runs that makes the text a copy of the prompt."""


def copies_prompt(text: str, prompt: str) -> bool:
    """True when ``text`` (at least :data:`COPY_MIN_CHARS` long) is made of ``prompt``'s own
    words: a passage of it (case, spacing and closing punctuation aside), or passages of it put
    together, :data:`COPY_COVERED` of its words or more inside runs of :data:`COPY_SHINGLE_WORDS`
    words that the prompt has too (punctuation aside). Small models fill a field with the
    prompt's description of it or its example. Qwen2.5-Coder-0.5B's reflector wrote the prompt's
    example, "Dividend payout ratio = dividends / net income, not dividends / revenue", as the key
    insight of most Formula questions, step 2's wording as the root cause, and that example joined
    to step 1's list of slips ("..., not dividends / revenue, a misread value, a unit, period or
    percentage slip, ...") as a lesson that Combee's reducer then kept."""
    needle = _comparable(text)
    if len(needle) < COPY_MIN_CHARS:
        return False
    if needle in _comparable_prompt(prompt):
        return True
    words = _WORD.findall(needle)
    if len(words) < COPY_SHINGLE_WORDS:
        return False
    runs = _prompt_runs(prompt)
    covered = [False] * len(words)
    for start in range(len(words) - COPY_SHINGLE_WORDS + 1):
        if tuple(words[start:start + COPY_SHINGLE_WORDS]) in runs:
            covered[start:start + COPY_SHINGLE_WORDS] = [True] * COPY_SHINGLE_WORDS
    return sum(covered) >= COPY_COVERED * len(words)


def _comparable(text: str) -> str:
    """``text`` casefolded, its whitespace runs made one space, without closing ``.``, quotes or spaces."""
    return one_line(text).casefold().strip(" .\"'")


@functools.lru_cache(maxsize=16)
def _comparable_prompt(prompt: str) -> str:
    """:func:`_comparable` of a role's prompt, computed once per prompt: every field of every reply
    is looked up in the same few prompts."""
    return _comparable(prompt)


@functools.lru_cache(maxsize=16)
def _prompt_runs(prompt: str) -> frozenset[tuple[str, ...]]:
    """Every run of :data:`COPY_SHINGLE_WORDS` words of a role's prompt, computed once per prompt."""
    words = _WORD.findall(_comparable_prompt(prompt))
    return frozenset(tuple(words[i:i + COPY_SHINGLE_WORDS]) for i in range(len(words) - COPY_SHINGLE_WORDS + 1))


def no_answer(text: str, *, role: str, question: str | None = None) -> CallError | None:
    """Why ``text`` (the answer field of a reply that parsed) carries no answer, as a
    :class:`CallError`, or None when it is content: empty (``no_answer``), the role's own name
    echoed back (``no_answer``: a server answering a schema with placeholders), a copy of the
    prompt's placeholder (``placeholder``), or a copy of the question (``no_answer``)."""
    stripped = text.strip()
    if not stripped:
        return CallError("no_answer", f"{role}: the reply parsed but its answer is empty", raw=text)
    if stripped.lower() == role.lower():
        return CallError("no_answer", f"{role}: the answer is the role's name echoed back, not content: "
                                      f"{stripped[:80]!r}", raw=text)
    if is_placeholder(stripped):
        return CallError("placeholder", f"{role}: the answer is {PLACEHOLDER_PROBLEM}: {stripped[:80]!r}", raw=text)
    if question is not None and len(question.strip()) >= COPY_MIN_CHARS and question.strip() in stripped:
        return CallError("no_answer", f"{role}: the answer is a copy of the question, not an answer", raw=text)
    return None


def clean_id(text: str) -> str:
    """The id of a context's part as models write it (``"[form-00001]"``, ``" form-00001 "``)
    reduced to the id."""
    return text.strip().strip("[]").strip()


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "number" if isinstance(value, (int, float)) else type(value).__name__


def _scan_braces(text: str) -> tuple[list[int], bool]:
    """Where top-level ``{`` start in ``text``, and whether the text ends inside an open object.

    Quotes count only inside braces, so apostrophes and quotes in surrounding prose do not matter.
    """
    starts: list[int] = []
    depth = 0
    in_string = escaped = False
    for position, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"' and depth > 0:
            in_string = True
        elif char == "{":
            if depth == 0:
                starts.append(position)
            depth += 1
        elif char == "}" and depth > 0:
            depth -= 1
    return starts, depth > 0


def decode_json_object(data: Any, text: str | None) -> dict[str, Any] | CallError:
    """The JSON object a model returned, from already-parsed ``data`` or from its raw ``text``.

    ``text`` may be bare JSON, JSON inside a ```json fence, or JSON surrounded by prose (the
    first top-level ``{...}`` that decodes wins; objects nested in a broken one are never taken).
    Control characters inside strings (raw newlines, as llama.cpp grammars allow) are accepted;
    otherwise standard JSON only: trailing commas, single quotes and comments are malformed. Errors: ``malformed_json`` (nothing decodes), ``truncated`` (the object is cut
    off before its end), ``schema_mismatch`` (the JSON is not an object). ``raw`` keeps ``text``.
    """
    if data is not None:
        if isinstance(data, dict):
            return data
        return CallError("schema_mismatch", f"expected a JSON object, got {_json_type(data)}", raw=text)
    if text is None or not text.strip():
        return CallError("malformed_json", "empty response: no JSON object", raw=text)
    stripped = text.strip()
    candidates = [stripped] + [block.strip() for block in _FENCE.findall(text)]
    first_error: str | None = None
    for candidate in candidates:
        try:
            value = json.loads(candidate, strict=False)
        except ValueError as exc:
            first_error = first_error or str(exc)
            continue
        if isinstance(value, dict):
            return value
        if candidate is stripped:
            return CallError("schema_mismatch", f"expected a JSON object, got {_json_type(value)}", raw=text)
    starts, unclosed = _scan_braces(stripped)
    for start in starts[:_MAX_OBJECT_STARTS]:
        try:
            value, _end = _json_decoder.raw_decode(stripped, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    if not starts:
        return CallError("malformed_json", "no JSON object in the response", raw=text)
    if unclosed:
        return CallError("truncated", "the JSON object is cut off before its end", raw=text)
    return CallError("malformed_json", f"invalid JSON: {first_error}", raw=text)


def convert(obj: dict[str, Any], shape: type[T], text: str | None, *, what: str) -> T | CallError:
    """``obj`` validated into ``shape`` (a msgspec Struct); ``schema_mismatch`` naming the key if it does not fit."""
    try:
        return msgspec.convert(obj, shape)
    except msgspec.ValidationError as exc:
        return CallError("schema_mismatch", f"{what} output: {exc}", raw=text)
