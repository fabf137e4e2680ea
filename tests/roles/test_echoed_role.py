"""Issue 52, finding 1: a reply that only echoes its role's name (what a server that does not know
the role sends back) is a ``placeholder`` failure of the call, counted and kept, never a parsed
answer; a reply that merely mentions the name is an answer."""

from __future__ import annotations

import orjson

from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.roles.calls import RoleCalls
from combee_fast.roles.clients import RoleClients
from combee_fast.roles.spec import Role
from combee_fast.schema import CallError, Message
from combee_fast.sim.responders import SimRequest, example_for_schema
from tests.conftest import StartSimServer

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}, "notes": {"type": "array"}},
          "required": ["text"]}


class RoleNameEcho:
    """A server answering every schema with the request's role name in each string field."""

    def respond(self, request: SimRequest) -> str:
        return orjson.dumps(example_for_schema(request.json_schema or {}, request.role)).decode()


class Mentions:
    def respond(self, request: SimRequest) -> str:
        return orjson.dumps({"text": f"{request.role}: the answer is 42", "notes": []}).decode()


async def _call(server_url: str) -> tuple[RoleCalls, object]:
    role = Role("demos_solve", "serve", 64)
    async with EndpointClient(EndpointConfig(name="e", base_url=server_url, model="m")) as client:
        calls = RoleCalls(None, RoleClients.single(client, [role]), [role], seed=0)
        request = calls.request(role.key, [Message(role="user", content="solve it")], "x", schema=SCHEMA)
        _, parsed = await calls.call(request, lambda data, text: data)
    return calls, parsed


async def test_a_reply_that_echoes_the_role_name_is_a_placeholder_failure(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(RoleNameEcho(), time_scale=0.001)
    calls, parsed = await _call(server.url)
    assert isinstance(parsed, CallError) and parsed.kind == "placeholder" and "demos_solve" in parsed.message
    assert calls.calls["demos_solve"] == 1 and calls.failures_total == 1
    assert calls.failures[0]["kind"] == "placeholder" and calls.failures[0]["raw"] == '{"text":"demos_solve","notes":[]}'


async def test_a_reply_that_mentions_the_role_name_is_an_answer(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(Mentions(), time_scale=0.001)
    calls, parsed = await _call(server.url)
    assert parsed == {"text": "demos_solve: the answer is 42", "notes": []} and calls.failures_total == 0
