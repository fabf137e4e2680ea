"""Agent code, contained: whatever an agent's ``run`` does, its episode's outcome is a value.

A user's agent (any but the built-in one) runs each episode on a thread of its own, on an event
loop of its own (:func:`run_agent`): a ``run`` that blocks (``time.sleep``, a busy loop,
blocking I/O) holds its own thread, never the engine's loop, so the episode's time limit holds
and a signal stops the run. It reaches the engine only through its episode
(:class:`ThreadEpisode`): each model call and action is carried out on the engine's loop and its
result handed back; ``finish``, ``fail`` and ``reject`` are applied there in the order made. At
the episode's limit the agent's task is cancelled and every later call it makes is refused
(:class:`~combee_fast.errors.EpisodeOver`); a thread that never returns is left to end on its own
(a daemon thread: it does not hold the process at its exit). An agent object serves many
episodes at once, each on its own thread: its ``run`` must keep its per-episode state local.

Whatever an agent raises, ``BaseException`` included (``SystemExit``, ``KeyboardInterrupt``, a
``CancelledError`` of its own making), fails its episode as ``agent_error``; only the engine's
own cancellation of the episode (its time limit, the run stopping) propagates. The built-in agent
(the engine's own code, which never blocks) runs on the engine's loop under the same rule, but
for ``KeyboardInterrupt``: there it is the second Ctrl-C, which stops the run at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from combee_fast.errors import EpisodeOver

if TYPE_CHECKING:
    from combee_fast.endpoint.calls import ChatResult
    from combee_fast.protocols.rollouts import Agent, AgentEpisode
    from combee_fast.schema import CallError, Message, Observation, ToolCall

T = TypeVar("T")


def described(exc: BaseException) -> str:
    """How an agent's exception is told in its episode's error."""
    return f"{type(exc).__name__}: {exc}"


def being_cancelled() -> bool:
    """Whether the running task is being cancelled (a ``CancelledError`` caught now is the
    engine's, not one that code it runs made up)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class ThreadEpisode:
    """An episode as an agent on its own thread sees it (:class:`~combee_fast.protocols.AgentEpisode`):
    every call is carried out by ``run`` on the engine's ``loop``."""

    def __init__(self, run: AgentEpisode, loop: asyncio.AbstractEventLoop) -> None:
        self._run = run
        self._loop = loop
        self.closed = False
        self.task = run.task
        self.context = run.context
        self.seed = run.seed
        self.round = run.round
        self.previous_answer = run.previous_answer
        self.feedback = run.feedback
        self.citable = run.citable
        self.tools = run.tools
        self.observation = run.observation
        self.context_length = run.context_length
        self.tool_calls = run.tool_calls

    @property
    def steps_left(self) -> int:
        return 0 if self.closed else self._run.steps_left

    async def _on_engine(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self.closed:
            coroutine.close()
            raise EpisodeOver("the episode is over")
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return await asyncio.wrap_future(future)

    def _apply(self, call: Callable[[], None]) -> None:
        if self.closed:
            raise EpisodeOver("the episode is over")
        self._loop.call_soon_threadsafe(call)

    async def chat(self, messages: Sequence[Message], *, tools: Sequence[dict[str, Any]] = (),
                   schema: dict[str, Any] | None = None, max_tokens: int | None = None) -> ChatResult:
        return await self._on_engine(self._run.chat(messages, tools=tools, schema=schema, max_tokens=max_tokens))

    async def act(self, action: ToolCall) -> Observation:
        return await self._on_engine(self._run.act(action))

    def reject(self, error: CallError) -> None:
        self._apply(functools.partial(self._run.reject, error))

    def fail(self, kind: str, message: str, *, step: int | None = None) -> None:
        self._apply(functools.partial(self._run.fail, kind, message, step=step))

    def finish(self, answer: str | None, *, cited: Sequence[str] = ()) -> None:
        self._apply(functools.partial(self._run.finish, answer, cited=cited))


class _AgentThread:
    """One episode's agent on its own thread and loop; :attr:`done` (on the engine's loop) holds
    its failure (None: it returned or gave up with :class:`EpisodeOver`)."""

    def __init__(self, agent: Agent, episode: ThreadEpisode, loop: asyncio.AbstractEventLoop) -> None:
        self._agent = agent
        self._episode = episode
        self._engine = loop
        self.done: asyncio.Future[str | None] = loop.create_future()
        self._lock = threading.Lock()
        self._own: tuple[asyncio.AbstractEventLoop, asyncio.Task[None]] | None = None
        self._stopped = False

    def start(self) -> None:
        threading.Thread(target=self._main, name="combee-agent", daemon=True).start()

    def stop(self) -> None:
        """The episode is over: refuse the agent's later calls and cancel its task."""
        self._episode.closed = True
        with self._lock:
            self._stopped = True
            own = self._own
        if own is not None:
            with contextlib.suppress(RuntimeError):  # its loop has closed meanwhile
                own[0].call_soon_threadsafe(own[1].cancel)

    async def _run(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        with self._lock:
            if self._stopped:
                return
            self._own = (asyncio.get_running_loop(), task)
        await self._agent.run(self._episode)

    def _main(self) -> None:
        failure: str | None = None
        try:
            asyncio.run(self._run())
        except EpisodeOver:
            pass
        except BaseException as exc:  # whatever the agent raises is its episode's failure
            failure = described(exc)
        with contextlib.suppress(RuntimeError):  # the engine's loop is gone: no one waits
            self._engine.call_soon_threadsafe(_settle, self.done, failure)


def _settle(done: asyncio.Future[str | None], failure: str | None) -> None:
    if not done.done():
        done.set_result(failure)


async def run_agent(agent: Agent, run: AgentEpisode, *, threaded: bool) -> None:
    """Run ``agent`` in the episode ``run`` (module docstring): on a thread of its own when
    ``threaded``, else on this loop. What it raises fails the episode (``agent_error``); the
    cancellation of this task propagates (the agent is stopped first)."""
    if not threaded:
        try:
            await agent.run(run)
        except EpisodeOver:
            pass
        except asyncio.CancelledError as exc:
            if being_cancelled():
                raise  # the episode is being cancelled, not failed by the agent
            run.fail("agent_error", described(exc))
        except KeyboardInterrupt:
            raise  # on the engine's loop this is the second Ctrl-C: the run stops at once
        except BaseException as exc:  # a broken agent fails its episode, never the run
            run.fail("agent_error", described(exc))
        return
    loop = asyncio.get_running_loop()
    thread = _AgentThread(agent, ThreadEpisode(run, loop), loop)
    thread.start()
    try:
        failure = await asyncio.shield(thread.done)
    except BaseException:
        thread.stop()
        raise
    if failure is not None:
        run.fail("agent_error", failure)
