"""Reflector: diagnoses one scored rollout and tags the bullets it cited.

User message tags (each on its own line, content between): ``<question>``, ``<model_reasoning>``,
``<model_answer>``, ``<cited_bullets>``, ``<feedback>`` and ``<ground_truth>`` (left out entirely
in the no-ground-truth variant, which also uses its own system prompt).
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

import msgspec

from combee_fast.ace.playbook.format import bullet_line
from combee_fast.roles import bounds
from combee_fast.roles.base import (
    clean_id,
    convert,
    copies_prompt,
    decode_json_object,
    fill,
    is_placeholder,
    load_prompt,
    no_answer,
)
from combee_fast.schema import CallError, Message, Rollout, Usage
from combee_fast.ace.records import Bullet, BulletTag, Reflection

REFLECTOR_MAX_TOKENS = 1024
REFLECTOR_SYSTEM_PROMPT = load_prompt("reflector.txt", beside=__file__)
REFLECTOR_NO_GROUND_TRUTH_SYSTEM_PROMPT = load_prompt("reflector_no_ground_truth.txt", beside=__file__)
REFLECTOR_USER_TEMPLATE = load_prompt("reflector_user.txt", beside=__file__)
REFLECTOR_GROUND_TRUTH_TEMPLATE = load_prompt("reflector_ground_truth.txt", beside=__file__)

NO_CITED_BULLETS = "(no playbook entries were cited)"

_DIAGNOSIS_KEYS = ("error_identification", "root_cause", "correct_approach", "key_insight")
_TEXT_KEYS = ("reasoning", *_DIAGNOSIS_KEYS)
_OWN_INSTRUCTIONS = "\n".join((REFLECTOR_SYSTEM_PROMPT, REFLECTOR_NO_GROUND_TRUTH_SYSTEM_PROMPT))

REFLECTOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **{key: bounds.text(bounds.REASONING_CHARS if key == "reasoning" else bounds.FIELD_CHARS)
           for key in _TEXT_KEYS},
        "bullet_tags": bounds.array({
            "type": "object",
            "properties": {
                "id": bounds.text(bounds.ID_CHARS),
                "tag": {"type": "string", "enum": ["helpful", "harmful", "neutral"]},
            },
            "required": ["id", "tag"],
            "additionalProperties": False,
        }, bounds.MAX_CITED),
    },
    "required": [*_TEXT_KEYS, "bullet_tags"],
    "additionalProperties": False,
}
"""JSON Schema of the reflector's reply, for ``response_format``. Do not mutate; a request's schema
enumerates the cited ids (:func:`reflector_schema`)."""


def reflector_schema(cited_ids: Sequence[str]) -> dict[str, Any]:
    """:data:`REFLECTOR_SCHEMA` whose tags may only name ``cited_ids`` (none: no tags)."""
    schema = bounds.with_ids(REFLECTOR_SCHEMA, ("bullet_tags", "*", "id"), cited_ids)
    if not cited_ids:
        schema["properties"]["bullet_tags"]["maxItems"] = 0
    return schema


class _TagReply(msgspec.Struct):
    id: str
    tag: Literal["helpful", "harmful", "neutral"]


class _ReflectorReply(msgspec.Struct):
    reasoning: str
    error_identification: str
    root_cause: str
    correct_approach: str
    key_insight: str
    bullet_tags: list[_TagReply]


def cited_bullets_text(bullets: Sequence[Bullet]) -> str:
    """The cited bullets as playbook lines ``[id] helpful=X harmful=Y :: content``, one per line, in order."""
    if not bullets:
        return NO_CITED_BULLETS
    return "\n".join(bullet_line(bullet) for bullet in bullets)


def _outcome(rollout: Rollout) -> str:
    if rollout.error is not None and rollout.answer is None:
        return f"no usable answer ({rollout.error.kind}: {rollout.error.message})"
    if rollout.score is None:
        return "not scored"
    verdict = "correct" if rollout.correct else "incorrect"
    return f"{verdict}, score {rollout.score:.2f} (1.00 = fully correct)"


def reflector_messages(rollout: Rollout, cited_bullets_text: str, *, ground_truth: str | None) -> tuple[Message, ...]:
    """System + user messages to reflect on ``rollout``; without ``ground_truth`` the no-ground-truth variant."""
    ground_truth_block = ""
    if ground_truth is not None:
        ground_truth_block = fill(REFLECTOR_GROUND_TRUTH_TEMPLATE, ground_truth=ground_truth)
    user = fill(
        REFLECTOR_USER_TEMPLATE,
        question=rollout.example.input,
        reasoning=rollout.reasoning if rollout.reasoning.strip() else "(no reasoning given)",
        answer="(no answer)" if rollout.answer is None else rollout.answer,
        cited_bullets=cited_bullets_text if cited_bullets_text.strip() else NO_CITED_BULLETS,
        outcome=_outcome(rollout),
        feedback=rollout.feedback if rollout.feedback.strip() else "(no feedback)",
        ground_truth_block=ground_truth_block,
    )
    system = REFLECTOR_SYSTEM_PROMPT if ground_truth is not None else REFLECTOR_NO_GROUND_TRUTH_SYSTEM_PROMPT
    return (Message("system", system), Message("user", user))


def _normalise_tags(obj: dict[str, Any]) -> dict[str, Any]:
    """Tag names as models vary them ("Helpful ") made canonical before validation."""
    tags = obj.get("bullet_tags")
    if not isinstance(tags, list):
        return obj
    fixed = [
        {**tag, "tag": tag["tag"].strip().lower()} if isinstance(tag, dict) and isinstance(tag.get("tag"), str) else tag
        for tag in tags
    ]
    return {**obj, "bullet_tags": fixed}


def diagnoses(reflection: Reflection) -> bool:
    """Whether ``reflection`` says anything: one of its diagnosis fields is not blank."""
    return any(getattr(reflection, key).strip() for key in _DIAGNOSIS_KEYS)


def failed_reflection(rollout_id: str, usage: Usage, error: CallError) -> Reflection:
    """The record of a reflection that could not be obtained: empty fields, ``error`` set."""
    return Reflection(rollout_id, "", "", "", "", "", (), usage, error=error)


def parse_reflector(data: Any, text: str | None, *, rollout_id: str, usage: Usage) -> Reflection:
    """The reflector's reply as a :class:`Reflection`; on unusable output ``.error`` is set and fields are empty.

    A diagnosis field (error identification, root cause, correct approach, key insight) that copies
    the prompt, a placeholder such as ``<why it went wrong>`` or a passage of the instructions
    (:func:`~combee_fast.roles.base.copies_prompt`), is left empty: the other fields are kept. A
    reply whose every diagnosis field is empty or copied, at least one copied, is a failed
    reflection (``placeholder``). Tags are cleaned (brackets around ids, case of tag names); a
    bullet tagged twice keeps its first tag.
    """
    obj = decode_json_object(data, text)
    if isinstance(obj, CallError):
        return failed_reflection(rollout_id, usage, obj)
    reply = convert(_normalise_tags(obj), _ReflectorReply, text, what="reflector")
    if isinstance(reply, CallError):
        return failed_reflection(rollout_id, usage, reply)
    diagnosis = {key: getattr(reply, key) for key in _DIAGNOSIS_KEYS}
    copied = {key: value for key, value in diagnosis.items() if _copied(value)}
    if copied and all(key in copied or not value.strip() for key, value in diagnosis.items()):
        key, value = next(iter(copied.items()))
        problem = CallError("placeholder", f"every diagnosis field is empty or a copy of the prompt (its placeholder or "
                                           f"its own words), not content: {key} {value[:80]!r}", raw=text)
        return failed_reflection(rollout_id, usage, problem)
    diagnosis |= dict.fromkeys(copied, "")
    if diagnosis["key_insight"].strip() and (echo := no_answer(diagnosis["key_insight"], role="reflector")) is not None:
        return failed_reflection(rollout_id, usage, echo)  # the role's name echoed back
    tags: dict[str, BulletTag] = {}
    for tag in reply.bullet_tags:
        bullet_id = clean_id(tag.id)
        if bullet_id and bullet_id not in tags:
            tags[bullet_id] = BulletTag(bullet_id, tag.tag)
    return Reflection(rollout_id=rollout_id, reasoning=reply.reasoning, **diagnosis,
                      bullet_tags=tuple(tags.values()), usage=usage)


def _copied(value: str) -> bool:
    """Whether a diagnosis field copies the reflector's prompt (a placeholder or its own words)."""
    return is_placeholder(value) or copies_prompt(value, _OWN_INSTRUCTIONS)
