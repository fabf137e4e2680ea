"""Agents the tests plug in with ``--agent tests.rollouts.agents:<factory>`` (real agents of the
contract, run by the engine like any user's).

- ``hostile``: item ``k`` of its batch (by example index) runs hostile command ``k`` of
  :data:`HOSTILE` (a fork bomb, filling the disk, sleeping forever, printing without end, reading
  secrets, opening a network connection, writing outside its working directory), waiting
  :data:`THINK_S` between two commands; other items look around and finish. ``all_hostile``:
  every item is hostile.
- ``counting``: the built-in ReAct agent, writing one line per episode it starts to the file named
  by ``COMBEE_TEST_EPISODE_LOG``: ``<item> <round> <context hash>``.
- ``broken``: raises in the middle of its episode.
- ``vanishing``: on item 0 its process dies in the middle of the episode (the ``process``
  backend's worker); elsewhere the built-in agent.
- ``exiting``, ``bare_raising``, ``cancelling``: raise ``SystemExit(7)``, a bare ``BaseException``,
  a ``CancelledError`` of their own from ``run``; ``sleeper`` blocks its thread for a minute on item 0.
- ``object_finisher``, ``dict_finisher``, ``long_finisher``: finish with an object, a dict, an
  answer of five million characters.
- ``fd_lister``: runs one command that lists its shell's open descriptors and finishes with the
  listing as its answer.
- ``talker``: says one thing with the environment's ``say`` tool, then finishes; ``lingering``
  keeps calling the model (slowly) until its episode is stopped.
"""

from __future__ import annotations

import asyncio
import os

from combee_fast.config import AgentConfig
from combee_fast.protocols import AgentEpisode
from combee_fast.rollouts.attempts import context_sha
from combee_fast.rollouts.react import ReactAgent
from combee_fast.schema import Message, ToolCall

HOSTILE = {
    "process_limit": ["bomb() { bomb | bomb & }; bomb", "sleep 1; echo done"],
    "disk_full": ["for i in $(seq 100); do head -c 1M /dev/zero > fill$i || exit 1; done"],
    "step_timeout": ["sleep 100000"],
    "output_limit": ["yes 'all work and no play'"],
    "hidden_path": ["cat /etc/shadow; printenv OPENAI_API_KEY > key.txt; cat /root/.ssh/id_rsa"],
    "network_denied": ["python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 443), timeout=3)'"],
    "write_denied": ["echo owned > /usr/combee-escape.txt"],
}
"""Hostile commands by the error kind each must end in."""


THINK_S = 0.5
"""Seconds the hostile agents wait between two commands, as a model's turn would take: time for a
fork bomb run in the background to hit the process limit, and often to die out, before the next."""


def _run(command: str) -> ToolCall:
    import json

    return ToolCall("run", json.dumps({"command": command}))


class Hostile:
    def __init__(self, *, every: bool) -> None:
        self.every = every

    async def run(self, episode: AgentEpisode) -> None:
        kinds = list(HOSTILE)
        index = episode.task.index % len(kinds) if self.every else episode.task.index
        commands = HOSTILE[kinds[index]] if index < len(kinds) else ["ls -la"]
        for turn, command in enumerate(commands):
            if turn:
                await asyncio.sleep(THINK_S)
            await episode.act(_run(command))
        episode.finish("done")


def hostile() -> Hostile:
    return Hostile(every=False)


def all_hostile() -> Hostile:
    return Hostile(every=True)


class Counting(ReactAgent):
    async def run(self, episode: AgentEpisode) -> None:
        with open(os.environ["COMBEE_TEST_EPISODE_LOG"], "a") as log:
            log.write(f"{episode.task.id} {episode.round} {context_sha(episode.context)}\n")
        await super().run(episode)


def counting() -> Counting:
    return Counting(AgentConfig())


class Broken:
    async def run(self, episode: AgentEpisode) -> None:
        await episode.chat([Message("user", episode.task.input)])
        raise RuntimeError("this agent is broken")


def broken() -> Broken:
    return Broken()


class Talker:
    async def run(self, episode: AgentEpisode) -> None:
        await episode.chat([Message("user", episode.task.input)])
        await episode.act(ToolCall("say", '{"text": "hello"}'))
        episode.finish("said")


def talker() -> Talker:
    return Talker()


class Lingering:
    async def run(self, episode: AgentEpisode) -> None:
        import asyncio

        while True:
            await asyncio.sleep(0.2)
            await episode.act(ToolCall("say", '{"text": "still here"}'))


def lingering() -> Lingering:
    return Lingering()


class Vanishing(ReactAgent):
    async def run(self, episode: AgentEpisode) -> None:
        if episode.task.index == 0 and episode.round == 0:
            await episode.act(_run("ls"))
            os._exit(17)
        await super().run(episode)


def vanishing() -> Vanishing:
    return Vanishing(AgentConfig())


FD_LISTING = "ls -l /proc/self/fd > /tmp/fds; sed -n 's/.* \\([0-9][0-9]*\\) -> /\\1 /p' /tmp/fds"
"""A command printing each descriptor a process it starts holds open (``ls`` listing its own,
its output redirected to ``/tmp/fds``): ``N TARGET`` per line."""


class FdLister:
    async def run(self, episode: AgentEpisode) -> None:
        observation = await episode.act(_run(FD_LISTING))
        episode.finish(observation.text)


def fd_lister() -> FdLister:
    return FdLister()


class Raising:
    """Makes one model call, then raises ``exception`` (any ``BaseException``) from its ``run``."""

    def __init__(self, exception: BaseException) -> None:
        self.exception = exception

    async def run(self, episode: AgentEpisode) -> None:
        await episode.chat([Message("user", episode.task.input)])
        raise self.exception


def exiting() -> Raising:
    return Raising(SystemExit(7))


def bare_raising() -> Raising:
    return Raising(BaseException("a bare one"))


def cancelling() -> Raising:
    import asyncio

    return Raising(asyncio.CancelledError("of its own"))


class Sleeper:
    """On item 0, blocks its thread (``time.sleep``) in the middle of its episode, for a minute;
    elsewhere finishes at once."""

    async def run(self, episode: AgentEpisode) -> None:
        import time

        await episode.chat([Message("user", episode.task.input)])
        if episode.task.index == 0:
            time.sleep(60)
        episode.finish("awake")


def sleeper() -> Sleeper:
    return Sleeper()


class Finisher:
    """Finishes at once with ``answer`` (whatever it is)."""

    def __init__(self, answer: object) -> None:
        self.answer = answer

    async def run(self, episode: AgentEpisode) -> None:
        await episode.chat([Message("user", episode.task.input)])
        episode.finish(self.answer)  # type: ignore[arg-type]


def object_finisher() -> Finisher:
    return Finisher(object())


def dict_finisher() -> Finisher:
    return Finisher({"answer": 1})


def long_finisher() -> Finisher:
    return Finisher("x" * 5_000_000)
