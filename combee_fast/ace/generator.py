"""Generator: answers a task input with the playbook in its context, citing the bullets it used.

User message tags (each on its own line, content between): ``<playbook>``, ``<question>``, and on
retry rounds ``<previous_attempt>`` and ``<reflection>``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from combee_fast.roles import bounds
from combee_fast.ace.playbook.format import EMPTY_PLAYBOOK, ids_in
from combee_fast.roles.base import clean_id, convert, decode_json_object, fill, load_prompt
from combee_fast.schema import CallError, Message
from combee_fast.ace.records import Reflection

GENERATOR_MAX_TOKENS = 1024
GENERATOR_SYSTEM_PROMPT = load_prompt("generator.txt", beside=__file__)
GENERATOR_USER_TEMPLATE = load_prompt("generator_user.txt", beside=__file__)
GENERATOR_RETRY_TEMPLATE = load_prompt("generator_retry.txt", beside=__file__)
NO_REFLECTION = "(no analysis is available: find the mistake yourself)"

GENERATOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": bounds.text(bounds.REASONING_CHARS),
        "bullet_ids": bounds.array(bounds.text(bounds.ID_CHARS), bounds.MAX_CITED),
        "final_answer": bounds.text(bounds.ANSWER_CHARS),
    },
    "required": ["reasoning", "bullet_ids", "final_answer"],
    "additionalProperties": False,
}
"""JSON Schema of the generator's reply, for ``response_format``. Do not mutate; a request's schema
enumerates the playbook's ids (:func:`generator_schema`)."""


def generator_schema(playbook_text: str) -> dict[str, Any]:
    """:data:`GENERATOR_SCHEMA` whose ``bullet_ids`` may only be ids of ``playbook_text``."""
    return bounds.with_ids(GENERATOR_SCHEMA, ("bullet_ids", "*"), ids_in(playbook_text))


class GeneratorOutput(msgspec.Struct, frozen=True):
    """A parsed generator reply. ``bullet_ids`` are cleaned (brackets and blanks removed) and
    de-duplicated; they become the rollout's ``cited``. The name is ACE's reply format (its
    prompt and schema ask for ``bullet_ids``), kept as a model has been asked for it."""

    reasoning: str
    bullet_ids: tuple[str, ...]
    final_answer: str


class _GeneratorReply(msgspec.Struct):
    reasoning: str
    bullet_ids: list[str]
    final_answer: str | int | float  # models often write a bare number; it is read as its JSON text


def reflection_text(reflection: Reflection) -> str | None:
    """A usable reflection as the generator (or an agent) reads it on a retry round; None for
    one that failed."""
    if reflection.error is not None:
        return None
    return "\n".join(
        (
            f"Error: {reflection.error_identification}",
            f"Root cause: {reflection.root_cause}",
            f"Correct approach: {reflection.correct_approach}",
            f"Key insight: {reflection.key_insight}",
        )
    )


def generator_messages(
    question: str,
    playbook_text: str,
    *,
    retry: tuple[str | None, str | None] | None = None,
) -> tuple[Message, ...]:
    """System + user messages for one generator call.

    ``retry``: on a retry round, the previous answer and the feedback on it (the reflection's
    text, :func:`reflection_text`): the retry block (``<previous_attempt>``, ``<reflection>``)
    then appears; feedback that could not be had (None) is shown as unavailable.
    """
    retry_block = ""
    if retry is not None:
        previous_answer, feedback = retry
        retry_block = fill(
            GENERATOR_RETRY_TEMPLATE,
            previous_attempt="(no answer)" if previous_answer is None else previous_answer,
            reflection=NO_REFLECTION if feedback is None else feedback,
        )
    user = fill(
        GENERATOR_USER_TEMPLATE,
        playbook=playbook_text if playbook_text.strip() else EMPTY_PLAYBOOK,
        question=question,
        retry_block=retry_block,
    )
    return (Message("system", GENERATOR_SYSTEM_PROMPT), Message("user", user))


def parse_generator(data: Any, text: str | None) -> GeneratorOutput | CallError:
    """The generator's reply from parsed ``data`` or raw ``text``; a typed :class:`CallError` if unusable."""
    obj = decode_json_object(data, text)
    if isinstance(obj, CallError):
        return obj
    reply = convert(obj, _GeneratorReply, text, what="generator")
    if isinstance(reply, CallError):
        return reply
    ids = dict.fromkeys(cleaned for cleaned in map(clean_id, reply.bullet_ids) if cleaned)
    answer = reply.final_answer if isinstance(reply.final_answer, str) else str(reply.final_answer)
    return GeneratorOutput(reply.reasoning, tuple(ids), answer.strip())
