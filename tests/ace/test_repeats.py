"""A curator's or reducer's reply stops at its first repeat (``combee_fast.ace.repeats``): tried
on the recorded replies of Qwen2.5-Coder-0.5B (``tests/data/real-replies``), streamed by a real
HTTP server on loopback one token an event as llama.cpp streams them. A repeated operation never
reaches the playbook, and its tokens are never generated or counted: the server stops writing
when the client closes the connection at the cut."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from combee_fast.ace.calls import AceCalls
from combee_fast.ace.repeats import RepeatCut, lessons_in
from combee_fast.endpoint.client import EndpointClient
from combee_fast.ace.playbook import Playbook
from combee_fast.schema import Usage
from combee_fast.ace.records import Delta, Op, OpKind, Reflection
from tests.endpoint.test_client import config

REPLIES = Path(__file__).parents[1] / "data" / "real-replies" / "qwen2.5-coder-0.5b-llamacpp.jsonl"
TOKENS = re.compile(r"\s+|\w+|[^\w\s]")
"""Pieces of a recorded reply streamed one an event (the recording keeps no token boundaries)."""


def recorded_curator_replies() -> list[str]:
    """The 0.5B's curator replies of the Combee bench run that repeat an operation."""
    replies = [json.loads(line) for line in REPLIES.read_text().splitlines()]
    texts = [r["content"] for r in replies if r["run"] == "formula-combee-bench" and r["role"] == "curator"]
    return [t for t in texts if len({op["content"] for op in json.loads(t)["operations"]}) < len(json.loads(t)["operations"])]


class ReplayServer:
    """Streams ``reply`` as a llama.cpp server does (a token an event, then the usage), or answers
    it whole (``stream`` false in the request); counts the events it managed to write."""

    def __init__(self, reply: str) -> None:
        self.pieces = TOKENS.findall(reply)
        self.reply = reply
        self.written = 0
        self.url = ""

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        body = await request.json()
        usage = {"prompt_tokens": 900, "completion_tokens": len(self.pieces), "total_tokens": 900 + len(self.pieces)}
        if not body.get("stream"):
            return web.json_response({"choices": [{"message": {"content": self.reply}, "finish_reason": "stop"}],
                                      "usage": usage})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for piece in self.pieces:
                event = {"choices": [{"index": 0, "delta": {"content": piece}}]}
                await response.write(b"data: " + orjson.dumps(event) + b"\n\n")
                self.written += 1
                await asyncio.sleep(0.005)  # generating: the client's close is seen before the end
            await response.write(b"data: " + orjson.dumps({"choices": [], "usage": usage}) + b"\n\ndata: [DONE]\n\n")
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass  # the client went away: stop generating, as llama.cpp does
        return response


async def serve(server: ReplayServer) -> AsyncIterator[ReplayServer]:
    runner = web.ServerRunner(web.Server(server.handle, access_log=None))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    server.url = f"http://{host}:{port}/v1"
    try:
        yield server
    finally:
        await runner.cleanup()


REFLECTION = Reflection("r0", "", "wrong formula", "misread the ratio", "use the formula", "Keep the formula.",
                        (), Usage(0, 0))


async def curate(reply: str, *, stream: bool) -> tuple[Any, ReplayServer]:
    async for server in serve(ReplayServer(reply)):
        async with EndpointClient(config(server, stream=stream)) as client:  # type: ignore[arg-type]
            calls = AceCalls.on_client(None, client, seed=0)
            proposal = await calls.curate([REFLECTION], Playbook.empty(), "", source="curator[0]", seed_path=(0, 0, 0))
        return proposal, server
    raise AssertionError("unreachable")


@pytest.mark.parametrize("reply", recorded_curator_replies())
async def test_a_repeated_operation_of_the_real_model_reaches_neither_the_playbook_nor_the_token_count(
        reply: str) -> None:
    recorded = json.loads(reply)["operations"]
    distinct = list(dict.fromkeys(op["content"] for op in recorded))
    first_repeat = next(i for i, op in enumerate(recorded) if op["content"] in (o["content"] for o in recorded[:i]))
    proposal, server = await curate(reply, stream=True)
    assert proposal.error is None, proposal.error
    assert [op.content for op in proposal.edits] == [op["content"] for op in recorded[:first_repeat]]
    playbook, report = Playbook.empty().apply(Delta(proposal.edits))
    assert not report.rejected and len(playbook.bullets()) == first_repeat <= len(distinct)
    # the tokens counted are the events read until the repeat ended: the rest was never generated
    watch, read = RepeatCut([]).watch(), 0
    while watch.feed(server.pieces[read]) is None:
        read += 1
    assert proposal.usage.completion_tokens == read + 1 < len(server.pieces)
    assert server.written < len(server.pieces) or len(server.pieces) - read < 20  # it stopped at the cut
    # a reply read whole is cut the same way after the fact; its tokens were all generated, all counted
    whole, _ = await curate(reply, stream=False)
    assert whole.edits == proposal.edits and whole.usage.completion_tokens == len(server.pieces)


def test_a_reply_that_does_not_repeat_is_never_cut() -> None:
    reply = ('{"reasoning": "two \\"new\\" lessons: {x} and [y]", "operations": ['
             '{"type": "ADD", "section": "s", "content": "A] }\\" lesson", "bullet_id": ""}, '
             '{"type": "UPDATE", "section": "s", "content": "B", "bullet_id": "s-1"}]}')
    watch = RepeatCut(["C"]).watch()
    assert all(watch.feed(char) is None for char in reply)


def test_an_operation_restating_the_playbook_or_naming_an_entry_twice_is_where_the_reply_stops() -> None:
    playbook = "## s\n[s-00001] helpful=0 harmful=0 :: Held   lesson.\n[s-00002] helpful=1 harmful=0 :: Other.\n"
    assert lessons_in(playbook) == {"s-00001": "Held lesson.", "s-00002": "Other."}
    head = 'Sure: {"reasoning": "r", "operations": [{"type": "ADD", "section": "s", "content": "New.", "bullet_id": ""}'
    restated = head + ', {"type": "ADD", "section": "s", "content": "Held lesson.", "bullet_id": ""}]}'
    twice = (head + ', {"type": "REMOVE", "section": "s", "content": "", "bullet_id": "s-00002"}, '
             '{"type": "UPDATE", "section": "s", "content": "Other, better.", "bullet_id": "[s-00002]"}]}')
    for reply, kept in ((restated, 1), (twice, 2)):
        cut = RepeatCut(lessons_in(playbook).values()).watch().feed(reply)
        assert cut is not None and cut.startswith("Sure: {")
        assert len(orjson.loads(cut[len("Sure: "):])["operations"]) == kept


def test_a_reducer_stops_at_a_reference_kept_twice_or_a_kept_lesson_written_out() -> None:
    references = {"P1.1": {"type": "ADD", "section": "s", "content": "Kept.", "bullet_id": ""}}
    twice = '{"reasoning": "r", "keep": ["P1.1", "p1.1", "P1.1"], "operations": []}'
    cut = RepeatCut([], references).watch().feed(twice)
    assert cut is not None and orjson.loads(cut) == {"reasoning": "r", "keep": ["P1.1"], "operations": []}
    written = ('{"reasoning": "r", "keep": ["P1.1"], "operations": [{"type": "ADD", "section": "s", '
               '"content": "Kept.", "bullet_id": ""}]}')
    cut = RepeatCut([], references).watch().feed(written)
    assert cut is not None and orjson.loads(cut)["operations"] == []
