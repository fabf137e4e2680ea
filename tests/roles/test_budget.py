"""Prompts that fit: the playbook is cut to the endpoint's context (counted by the server's tokenizer
when it has one), and a context error trims and retries, for every role whose prompt holds it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.endpoint.pool import EndpointPool
from combee_fast.endpoint.wire import ROLE_HEADER
from combee_fast.ace.playbook import Playbook
from combee_fast.ace.calls import AceCalls
from combee_fast.roles.budget import cut_context, is_context_error
from combee_fast.ace.generator import GENERATOR_MAX_TOKENS, GENERATOR_SYSTEM_PROMPT
from combee_fast.schema import CallError, Rollout
from combee_fast.tasks.registry import get_task
from tests.conftest import ThreadedServer

PLAYBOOK = "## formulas\n" + "".join(f"[form-{i:05d}] helpful=0 harmful=0 :: lesson {i} " + "x" * 80 + "\n"
                                     for i in range(1, 201))
REPLIES: dict[str, dict[str, Any]] = {
    "probe": {"answer": "yes"},
    "generator": {"reasoning": "r", "bullet_ids": [], "final_answer": "1"},
    "curator": {"reasoning": "r", "operations": []},
    "reducer": {"reasoning": "r", "keep": [], "operations": []},
}
"""What the fake server answers each role (by the request's role header)."""


class LlamaCppLike:
    """A llama.cpp-like server on loopback: ``GET /v1/models``; ``GET /props`` with ``n_ctx`` (when
    ``report_ctx``); ``POST /tokenize`` at one token per ``chars_per_token`` characters (when
    ``tokenizer``); ``POST /v1/chat/completions`` answering HTTP 400 ``exceed_context_size_error``,
    as ``llama-server`` does, when the prompt's tokens by its own count (plus
    :attr:`TEMPLATE_TOKENS` a message) and ``max_tokens`` exceed ``n_ctx``, else the role's reply.

    ``tokenized``: the content of every ``/tokenize`` request; ``chats``: ``(role, prompt tokens,
    status)`` of every chat request, ``max_tokens`` its reply bound and ``prompts`` its messages' text (the
    start-up probe's left out); ``tokenize_fails``: answer
    ``/tokenize`` with HTTP 500."""

    TEMPLATE_TOKENS = 5

    def __init__(self, n_ctx: int, *, report_ctx: bool = True, tokenizer: bool = True, chars_per_token: int = 2) -> None:
        self.n_ctx, self.report_ctx, self.tokenizer, self.chars_per_token = n_ctx, report_ctx, tokenizer, chars_per_token
        self.tokenized: list[str] = []
        self.chats: list[tuple[str, int, int]] = []
        self.max_tokens: list[int] = []
        self.prompts: list[str] = []
        self.tokenize_fails = False
        self._server = ThreadedServer(self._handle)

    def __enter__(self) -> LlamaCppLike:
        self._server.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.__exit__(*exc_info)

    @property
    def url(self) -> str:
        return self._server.url

    def tokens(self, text: str) -> int:
        return -(-len(text) // self.chars_per_token)

    def chats_of(self, role: str) -> list[tuple[int, int]]:
        """``(prompt tokens, status)`` of each chat request of ``role``."""
        return [(tokens, status) for chat_role, tokens, status in self.chats if chat_role == role]

    async def _handle(self, request: web.BaseRequest) -> web.Response:
        if request.path == "/v1/models":
            return web.json_response({"data": [{"id": "m"}]})
        if request.path == "/props" and self.report_ctx:
            return web.json_response({"default_generation_settings": {"n_ctx": self.n_ctx}, "total_slots": 4})
        if request.path == "/tokenize" and self.tokenizer:
            if self.tokenize_fails:
                return web.json_response({"error": "tokenizer down"}, status=500)
            content = (await request.json())["content"]
            self.tokenized.append(content)
            return web.json_response({"tokens": list(range(self.tokens(content)))})
        if request.path == "/v1/chat/completions":
            return self._chat(request.headers.get(ROLE_HEADER, ""), json.loads(await request.read()))
        return web.Response(status=404)

    def _chat(self, role: str, body: dict[str, Any]) -> web.Response:
        prompt = sum(self.tokens(m["content"]) + self.TEMPLATE_TOKENS for m in body["messages"])
        if role != "probe":  # the client's start-up detection
            self.max_tokens.append(body["max_tokens"])
            self.prompts.append("\n".join(m["content"] for m in body["messages"]))
        if prompt + body["max_tokens"] > self.n_ctx:
            self.chats.append((role, prompt, 400))
            return web.json_response({"error": {
                "code": 400, "type": "exceed_context_size_error",
                "message": f"the request exceeds the available context size ({prompt} + {body['max_tokens']} "
                           f"tokens, context {self.n_ctx}), try increasing it"}}, status=400)
        self.chats.append((role, prompt, 200))
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": json.dumps(REPLIES[role])},
                                               "finish_reason": "stop"}]})


def _examples(n: int):
    return get_task("formula").load(f"train[0:{n}]").examples


async def _generate(endpoint: EndpointClient | EndpointPool, examples=None) -> tuple[list[Rollout], AceCalls]:
    """The generator's rollouts of ``examples`` (default: the first) against ``PLAYBOOK``, all at
    once, on the ``endpoint`` detected first."""
    await endpoint.detect()
    return await _generate_detected(endpoint, examples)


async def _generate_detected(endpoint: EndpointClient | EndpointPool, examples=None) -> tuple[list[Rollout], AceCalls]:
    agents = AceCalls.on_client(get_task("formula"), endpoint, seed=0)  # type: ignore[arg-type]
    rollouts = await asyncio.gather(*(agents.generate(example, PLAYBOOK, epoch=0)
                                      for example in examples or _examples(1)))
    return list(rollouts), agents


def _client(url: str) -> EndpointClient:
    return EndpointClient(EndpointConfig(name="e", base_url=url, model="m"))


async def test_the_playbook_is_cut_to_the_reported_context_by_the_estimate() -> None:
    with LlamaCppLike(4096, tokenizer=False, chars_per_token=3) as server:
        async with _client(server.url) as client:
            (rollout,), agents = await _generate(client)
    assert rollout.error is None and agents.calls.trimmed["generator"] == 0
    ((tokens, status),) = server.chats_of("generator")
    assert server.max_tokens == [GENERATOR_MAX_TOKENS // 2]  # the playbook does not fit: the reply gave way
    assert status == 200 and tokens + GENERATOR_MAX_TOKENS // 2 <= 4096 < server.tokens(PLAYBOOK)


async def test_with_a_tokenizer_the_playbook_is_cut_exactly_and_fits_the_first_time(capsys) -> None:
    with LlamaCppLike(4096) as server:  # 2 characters a token: the 3-characters estimate is over
        async with _client(server.url) as client:
            assert await client.count_tokens("abcde") is None  # not detected yet: no tokenizer known
            (rollout,), agents = await _generate(client)
            assert await client.count_tokens("abcde") == 3
    assert rollout.error is None and agents.calls.trimmed["generator"] == 0
    ((tokens, status),) = server.chats_of("generator")
    assert status == 200 and 0.85 * 4096 <= tokens + GENERATOR_MAX_TOKENS // 2 <= 4096  # the room is used, not wasted
    assert "exceeded the context" not in capsys.readouterr().err
    with LlamaCppLike(4096, tokenizer=False) as estimated:  # the same server without a tokenizer
        async with _client(estimated.url) as client:
            (rollout,), agents = await _generate(client)
    assert rollout.error is None and agents.calls.trimmed["generator"] == 1
    assert [status for _, status in estimated.chats_of("generator")] == [400, 200]


async def test_a_playbook_is_tokenized_once_per_endpoint() -> None:
    with LlamaCppLike(4096) as server:
        async with EndpointPool([_client(server.url), _client(server.url)]) as pool:
            rollouts, agents = await _generate(pool, _examples(6))  # six calls at once
            again = [await agents.generate(example, PLAYBOOK, epoch=1) for example in _examples(3)]
    assert all(r.error is None for r in rollouts + again) and agents.calls.trimmed["generator"] == 0
    assert [status for _, status in server.chats_of("generator")] == [200] * 9
    assert server.tokenized.count(PLAYBOOK) == 1 and server.tokenized.count(GENERATOR_SYSTEM_PROMPT) == 1
    cut = [text for text in server.tokenized if PLAYBOOK.startswith(text) and text != PLAYBOOK]
    assert len(cut) == len(set(cut))  # each cut counted once


async def test_a_prompt_whose_bytes_fit_is_not_counted() -> None:
    with LlamaCppLike(100_000) as server:
        async with _client(server.url) as client:
            (rollout,), _ = await _generate(client)
    assert rollout.error is None and server.tokenized == ["ping"]  # only detect's probe of the tokenizer


async def test_count_tokens_is_none_without_a_tokenizer_or_when_it_fails() -> None:
    with LlamaCppLike(4096, tokenizer=False) as server:
        async with _client(server.url) as client:
            await client.detect()
            assert not client.capabilities.tokenize and await client.count_tokens("abcd") is None
    with LlamaCppLike(4096) as server:
        async with _client(server.url) as client:
            await client.detect()
            server.tokenize_fails = True
            assert client.capabilities.tokenize and await client.count_tokens("abcd") is None
            (rollout,), agents = await _generate_detected(client)  # a failed count: the estimate, short here
    assert rollout.error is None and agents.calls.trimmed["generator"] == 1


async def test_a_context_error_halves_the_playbook_and_sends_again(capsys) -> None:
    with LlamaCppLike(10_000, report_ctx=False, tokenizer=False) as server:
        async with _client(server.url) as client:
            (rollout,), agents = await _generate(client)
    assert rollout.error is None and agents.calls.trimmed == {"generator": 1, "curator": 0, "reducer": 0}
    (first, status), (second, _) = server.chats_of("generator")
    assert status == 400 and second < first
    assert "the generator's prompt exceeded the context" in capsys.readouterr().err


async def test_the_curator_and_reducer_are_trimmed_and_sent_again_on_a_context_error(capsys) -> None:
    # the reported context is met by the 3-characters estimate, but the server's tokens are 2 characters
    with LlamaCppLike(6144, tokenizer=False) as server:
        async with _client(server.url) as client:
            await client.detect()
            agents = AceCalls.on_client(get_task("formula"), client, seed=0)
            for _ in range(2):
                curated = await agents.curate([], Playbook.empty(), PLAYBOOK, source="s", seed_path=(0,))
                reduced = await agents.reduce([[], []], PLAYBOOK, source="s", seed_path=(0,))
                assert curated.error is None and reduced.error is None
    assert agents.calls.trimmed == {"generator": 0, "curator": 2, "reducer": 2}
    assert agents.calls.calls["curator"] == agents.calls.calls["reducer"] == 2  # a trimmed retry is part of its call
    for role in ("curator", "reducer"):
        statuses = [status for _, status in server.chats_of(role)]
        assert statuses == [400, 200, 400, 200], role
    err = capsys.readouterr().err
    assert err.count("the curator's prompt exceeded the context") == 1
    assert err.count("the reducer's prompt exceeded the context") == 1


async def test_the_curator_and_reducer_playbooks_are_cut_to_the_reported_context() -> None:
    with LlamaCppLike(4096) as server:
        async with _client(server.url) as client:
            await client.detect()
            agents = AceCalls.on_client(get_task("formula"), client, seed=0)
            curated = await agents.curate([], Playbook.empty(), PLAYBOOK, source="s", seed_path=(0,))
            reduced = await agents.reduce([[], []], PLAYBOOK, source="s", seed_path=(0,))
    assert curated.error is None and reduced.error is None
    assert server.max_tokens == [1024, 1024]  # half of each role's 2,048: the playbook does not fit beside it
    for role in ("curator", "reducer"):
        ((tokens, status),) = server.chats_of(role)
        assert status == 200 and tokens + 1024 <= 4096, role


async def test_the_reply_gives_way_before_the_playbook_is_cut() -> None:
    """A curator whose playbook fits beside half its 2,048 reply tokens but not beside all of them
    sees all of it, and replies within 1,024 (measured: the local 0.5B's Combee curators of four
    reflections each saw no playbook in a 4,096-token context, and re-added a lesson it held); one
    whose playbook fits beside all of them keeps its whole reply bound."""
    lines = [f"[form-{i:05d}] helpful=0 harmful=0 :: lesson {i} " + "x" * 80 for i in range(1, 201)]
    for n, expected in ((24, 1024), (2, 2048)):  # ~1,300 and ~110 tokens at 2 characters a token
        playbook = "## formulas\n" + "\n".join(lines[:n])
        with LlamaCppLike(4096) as server:
            async with _client(server.url) as client:
                await client.detect()
                agents = AceCalls.on_client(get_task("formula"), client, seed=0)
                curated = await agents.curate([], Playbook.empty(), playbook, source="s", seed_path=(0,))
        assert curated.error is None and server.max_tokens == [expected], n
        assert f"form-{n:05d}" in server.prompts[0], n  # the whole playbook was shown


def test_context_errors_are_recognised_and_cuts_keep_whole_lines() -> None:
    assert is_context_error(CallError(kind="http_status", message="HTTP 400", status=400,
                                      raw='{"error": {"code": "context_length_exceeded"}}'))
    assert not is_context_error(CallError(kind="http_status", message="HTTP 400", status=400, raw="bad json"))
    cut = cut_context(PLAYBOOK, 500)
    assert len(cut) <= 500 and PLAYBOOK.startswith(cut) and cut.endswith("\n")
