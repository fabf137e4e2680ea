"""Prompts that fit the endpoint's context: the playbook is cut to what the context leaves.

Applies to the roles whose prompt holds the playbook: generator, curator and reducer.

Policy: a prompt is budgeted only when the endpoint reported its context length
(:class:`~combee_fast.endpoint.capabilities.Capabilities`). Its tokens are estimated
conservatively at :data:`CONSERVATIVE_CHARS_PER_TOKEN` characters a token (a 219-entry playbook of
34k characters was 9,975 tokens for SmolLM2's tokenizer, 3.4 characters a token, where the
4-characters estimate said 8,512). The prompt plus the reply's ``max_tokens`` must fit; when it
does not, the playbook keeps its first lines (sections and bullets in rendered order) up to the
budget and the rest is left out of that call. A reply saying the context was still exceeded
(:func:`is_context_error`) halves the generator's playbook once more and the call is sent again
(counted as ``trimmed`` in the run directory's ``calls.json``, with a warning). The server's own
tokenizer (llama.cpp ``POST /tokenize``, noted in ``capabilities.json``) is not used yet.
"""

from __future__ import annotations

from combee_fast.schema import CallError

CONSERVATIVE_CHARS_PER_TOKEN = 3
"""Characters a token when estimating against a hard context limit (real tokenizers: ~3.4-4)."""

_CONTEXT_MARKERS = ("context_length_exceeded", "context length", "context size", "maximum context",
                    "too many tokens", "exceeds the available context")


def is_context_error(error: CallError | None) -> bool:
    """True when ``error`` says the prompt did not fit the server's context."""
    if error is None or error.kind != "http_status" or error.status not in (400, 413, 422, 500):
        return False
    text = (error.raw or error.message).lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


def prompt_chars_allowed(context_length: int, max_tokens: int) -> int:
    """Characters of prompt that leave ``max_tokens`` of ``context_length`` for the reply."""
    return max(0, (context_length - max_tokens) * CONSERVATIVE_CHARS_PER_TOKEN)


def cut_playbook(playbook_text: str, max_chars: int) -> str:
    """The first whole lines of ``playbook_text`` that fit in ``max_chars`` (the text itself if it fits)."""
    if len(playbook_text) <= max_chars:
        return playbook_text
    kept: list[str] = []
    used = 0
    for line in playbook_text.splitlines(keepends=True):
        if used + len(line) > max_chars:
            break
        kept.append(line)
        used += len(line)
    return "".join(kept)
