"""Prompts that fit the endpoint's context: the learned context (ACE's playbook, GEPA's candidate,
TextGrad's prompt variable, a plug-in's) is cut to what the endpoint's context leaves.

Applies to the roles whose prompt holds it (declared with ``fits_context``:
:class:`~combee_fast.roles.spec.Role`). Policy (:func:`fit_context`):

- A prompt is budgeted only when the endpoint reported its context length
  (:class:`~combee_fast.endpoint.capabilities.Capabilities`). Every message of the prompt, plus
  :data:`TEMPLATE_TOKENS_PER_MESSAGE` a message for the chat template, plus the reply's
  ``max_tokens`` must fit in it.
- When the endpoint has a tokenizer (llama.cpp ``POST /tokenize``; ``tokenize`` in
  ``capabilities.json``) the prompt is counted with it: each message and the context apart, each
  distinct text once per endpoint while :class:`TokenCounts` keeps it. A prompt whose UTF-8 bytes
  already fit is not counted (a token covers at least one byte). A context that does not fit is
  cut at its measured characters a token times :data:`CUT_MARGIN` and counted once more; still
  over, it is cut again at the new measure, uncounted.
- Without a tokenizer, or when a count fails, tokens are estimated conservatively at
  :data:`CONSERVATIVE_CHARS_PER_TOKEN` characters a token (a 219-entry playbook of 34k characters
  was 9,975 tokens for SmolLM2's tokenizer, 3.4 characters a token, where the 4-characters
  estimate said 8,512).
- The reply gives way first: a context that does not fit beside the role's whole ``max_tokens``
  is given the room of all but :data:`REPLY_GIVES_WAY_TO` of it (the call is sent with that
  ``max_tokens``), and is cut only if it does not fit even then.
- A cut keeps the context's first whole lines (a playbook's sections and bullets in rendered
  order); the rest is left out of that call.
- A reply saying the context was still exceeded (:func:`is_context_error`: a chat template or a
  tokenizer unlike the estimate) halves the role's context once more and the call is sent again,
  counted per role as ``trimmed`` in the run directory's ``calls.json``, with a warning the first
  time per role.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from combee_fast.schema import CallError, Message

CONSERVATIVE_CHARS_PER_TOKEN = 3
"""Characters a token when estimating against a hard context limit (real tokenizers: ~3.4-4)."""

REPLY_GIVES_WAY_TO = 0.5
"""The share of a role's ``max_tokens`` its reply keeps when the learned context does not fit beside
all of it. Measured on the local 0.5B (4,096-token context, bench/real_model.py, 2026-12-07):
Combee's curators of a step of 8, each reading four reflections, had ~2,000-token prompts, so the
2,048-token reply reserve left the playbook no room and they saw none (they re-added a lesson it
held, refused as a duplicate, and no repeat could be cut); their longest reply was 470 tokens."""

TEMPLATE_TOKENS_PER_MESSAGE = 8
"""Tokens allowed per message for what the chat template adds around it (ChatML's
``<|im_start|>role\\n...<|im_end|>\\n`` is 5, Llama 3's header and end 5-6, plus the assistant
turn's opener and a BOS spread over the messages). Templates that add text of their own are left
to the trim-and-retry."""

CUT_MARGIN = 0.95
"""A context cut at its measured characters a token aims at this fraction of the room left: the
lines kept need not tokenize like the whole."""

COUNTS_KEPT = 256
"""Distinct (endpoint, text) token counts a :class:`TokenCounts` keeps, least recently used dropped first."""

TokenCount = Callable[[str], Awaitable[int | None]]
"""Counts the tokens of a text with one endpoint's tokenizer; ``None`` when it could not."""

_CONTEXT_MARKERS = ("context_length_exceeded", "context length", "context size", "maximum context",
                    "too many tokens", "exceeds the available context")


class TokenCounter(Protocol):
    """An endpoint (client or pool of replicas) that may count tokens with the server's tokenizer."""

    async def count_tokens(self, text: str) -> int | None: ...


class TokenCounts:
    """Token counts by endpoints' tokenizers, each distinct text of an endpoint counted once while
    kept (the latest :data:`COUNTS_KEPT`, least recently used dropped first; keyed by the text's
    length and hash). Concurrent requests for one text share one count; a failed count (``None``)
    is kept too, so that text is estimated instead of asked again. Use on one event loop at a time.
    """

    def __init__(self, kept: int = COUNTS_KEPT) -> None:
        self._kept = kept
        self._counts: dict[tuple[int, int, int], asyncio.Future[int | None]] = {}

    async def count(self, counter: TokenCounter, text: str) -> int | None:
        """Tokens of ``text`` by ``counter`` (0 for the empty text, without asking)."""
        if not text:
            return 0
        key = (id(counter), len(text), hash(text))
        known = self._counts.pop(key, None)
        if known is None or known.cancelled():  # cancelled: its event loop ended before it finished
            known = asyncio.ensure_future(counter.count_tokens(text))
            if len(self._counts) >= self._kept:
                del self._counts[next(iter(self._counts))]
        self._counts[key] = known  # the most recently used last
        return await asyncio.shield(known)


def is_context_error(error: CallError | None) -> bool:
    """True when ``error`` says the prompt did not fit the server's context."""
    if error is None or error.kind != "http_status" or error.status not in (400, 413, 422, 500):
        return False
    text = (error.raw or error.message).lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


def conservative_tokens(text: str) -> int:
    """Tokens of ``text`` at :data:`CONSERVATIVE_CHARS_PER_TOKEN` characters a token, rounded up."""
    return -(-len(text) // CONSERVATIVE_CHARS_PER_TOKEN)


async def fit_context(context_text: str, others: Sequence[Message], room: int, count: TokenCount | None) -> str:
    """``context_text`` (the learned context) cut so that it and ``others`` (the prompt's messages
    built with an empty context), with :data:`TEMPLATE_TOKENS_PER_MESSAGE` a message, fit in ``room`` tokens (the
    context length less the reply's ``max_tokens``). ``count``: the endpoint's tokenizer, or
    ``None`` to estimate; see the module doc for the policy."""
    left = room - TEMPLATE_TOKENS_PER_MESSAGE * len(others)
    if sum(len(m.content.encode()) for m in others) + len(context_text.encode()) <= left:
        return context_text  # fits whatever the tokenizer
    if count is not None:
        fitted = await _fit_counted(context_text, others, left, count)
        if fitted is not None:
            return fitted
    left -= sum(conservative_tokens(m.content) for m in others)
    return cut_context(context_text, left * CONSERVATIVE_CHARS_PER_TOKEN)


async def _fit_counted(context_text: str, others: Sequence[Message], left: int, count: TokenCount) -> str | None:
    """``context_text`` cut to what ``others`` leave of ``left`` tokens, counted by ``count``;
    ``None`` when a count failed before a cut could be measured."""
    counted = [n for n in await asyncio.gather(count(context_text), *(count(m.content) for m in others))
               if n is not None]
    if len(counted) != 1 + len(others):
        return None
    tokens, *other_tokens = counted
    left -= sum(other_tokens)
    if tokens <= left:
        return context_text
    cut = _cut_measured(context_text, tokens, left)
    recounted = await count(cut)
    if recounted is None or recounted <= left:
        return cut
    return _cut_measured(cut, recounted, left)


def _cut_measured(text: str, tokens: int, left: int) -> str:
    """``text`` (``tokens`` long, more than ``left``) cut to ``left`` tokens at its measured
    characters a token times :data:`CUT_MARGIN`; empty when nothing is left."""
    return cut_context(text, int(len(text) * left / tokens * CUT_MARGIN)) if left > 0 else ""


def cut_context(context_text: str, max_chars: int) -> str:
    """The first whole lines of ``context_text`` (a learned context) that fit in ``max_chars`` (the
    text itself if it fits)."""
    if len(context_text) <= max_chars:
        return context_text
    kept: list[str] = []
    used = 0
    for line in context_text.splitlines(keepends=True):
        if used + len(line) > max_chars:
            break
        kept.append(line)
        used += len(line)
    return "".join(kept)
