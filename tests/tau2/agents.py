"""Agents the tau2/MCP tests plug in with ``--agent tests.tau2.agents:<factory>``.

- ``misbehaving``: item ``k`` asks the hostile server (:mod:`tests.tau2.hostile_mcp`) for
  misbehaviour ``k`` of :data:`MISBEHAVIOURS` (items past them ask for nothing bad), then
  finishes.
- ``daemonizing``: every item asks the hostile server to start a process in a session of its own,
  then finishes.
- ``hanging``: every item asks the hostile server to hang.
"""

from __future__ import annotations

import json

from combee_fast.protocols import AgentEpisode
from combee_fast.schema import ToolCall

MISBEHAVIOURS = {"hang": "mcp_timeout", "flood": "mcp_output_too_large", "malformed": "mcp_malformed",
                 "exit": "mcp_exited", "check_nan": "mcp_bad_check", "check_text": "mcp_bad_check",
                 "check_flood": "mcp_output_too_large"}
"""Each misbehaviour of the hostile server, and the error kind its episode must end in."""


class Misbehaving:
    async def run(self, episode: AgentEpisode) -> None:
        hows = list(MISBEHAVIOURS)
        how = hows[episode.task.index] if episode.task.index < len(hows) else "nothing"
        observation = await episode.act(ToolCall("misbehave", json.dumps({"how": how})))
        episode.finish(observation.text[:100])


def misbehaving() -> Misbehaving:
    return Misbehaving()


class Asking:
    """Asks the hostile server for ``how`` once, then finishes."""

    def __init__(self, how: str) -> None:
        self.how = how

    async def run(self, episode: AgentEpisode) -> None:
        observation = await episode.act(ToolCall("misbehave", json.dumps({"how": self.how})))
        episode.finish(observation.text[:100])


def daemonizing() -> Asking:
    return Asking("daemon")


def hanging() -> Asking:
    return Asking("hang")
