"""OpenAI tool calling through the endpoint client and the simulated server (real HTTP on
loopback): tools offered, calls answered (plain and streamed), a conversation carrying calls and
their results sent in OpenAI's form, the replay key telling them apart, and the probe."""

from __future__ import annotations

import msgspec

from combee_fast.endpoint.cache import request_key
from combee_fast.endpoint.client import ChatRequest, EndpointClient
from combee_fast.learners import role_table
from combee_fast.schema import Message, ToolCall
from combee_fast.sim.responders import SimReply, SimRequest
from combee_fast.sim.server import SimServer
from tests.conftest import StartSimServer
from tests.endpoint.test_client import config

RUN = {"type": "function", "function": {"name": "run", "description": "run a command",
                                        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}


class Recorder:
    """Calls ``run`` once per request, and keeps what each request carried."""

    def __init__(self) -> None:
        self.seen: list[SimRequest] = []

    def respond(self, request: SimRequest) -> SimReply:
        self.seen.append(request)
        return SimReply("running it", (ToolCall("run", '{"command": "ls"}', "call_7"),))


CONVERSATION = (
    Message("system", "act"), Message("user", "list the files"),
    Message("assistant", "", (ToolCall("run", '{"command": "pwd"}', "call_1"),)),
    Message("tool", "/work", tool_call_id="call_1"),
)


async def test_a_tool_call_comes_back_and_the_conversation_goes_in_openai_form(start_sim_server: StartSimServer) -> None:
    for stream in (False, True):
        recorder = Recorder()
        server = await start_sim_server(recorder, time_scale=0.001)
        async with EndpointClient(config(server, stream=stream)) as client:
            result = await client.chat(ChatRequest(role="generator", messages=CONVERSATION, tools=(RUN,),
                                                   tool_choice="auto"))
        assert result.error is None and result.text == "running it"
        assert result.tool_calls == (ToolCall("run", '{"command": "ls"}', "call_7"),)
        assert result.finish_reason == "tool_calls"
        seen = recorder.seen[0]
        assert seen.tools == (RUN,)
        assert seen.messages[2].tool_calls == (ToolCall("run", '{"command": "pwd"}', "call_1"),)
        assert seen.messages[3].role == "tool" and seen.messages[3].tool_call_id == "call_1"


def test_plain_messages_encode_as_before_and_tools_change_the_replay_key() -> None:
    plain = Message("user", "hi")
    assert msgspec.json.encode(plain) == b'{"role":"user","content":"hi"}'
    asked = ChatRequest(role="generator", messages=(plain,))
    assert request_key("m", asked) != request_key("m", msgspec.structs.replace(asked, tools=(RUN,)))
    called = msgspec.structs.replace(asked, messages=CONVERSATION)
    other = msgspec.structs.replace(asked, messages=(*CONVERSATION[:3], Message("tool", "/work", tool_call_id="x")))
    assert request_key("m", called) != request_key("m", other)


async def test_the_probe_finds_tool_calling_where_it_is(start_sim_server: StartSimServer) -> None:
    from combee_fast.sim.world import FORMULA_PARAMS, TaskWorld
    from combee_fast.tasks.registry import get_task

    task = get_task("formula")
    world_server: SimServer = await start_sim_server(TaskWorld(task, [], FORMULA_PARAMS, roles=role_table()),
                                                     time_scale=0.001)
    echo_server: SimServer = await start_sim_server(time_scale=0.001)
    async with EndpointClient(config(world_server)) as world, EndpointClient(config(echo_server)) as echo:
        assert await world.detect_tools() is True and world.capabilities.tools is True
        assert await echo.detect_tools() is False
        assert echo.capabilities.tried["tools"] == "the reply called no tool"
