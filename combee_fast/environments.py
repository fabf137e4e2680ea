"""What you need to write an environment of your own (``--env package.module:factory``).

The factory is called with the run's :class:`Sandboxes` once per episode and returns a fresh
:class:`Environment`; the executor calls :meth:`~Environment.reset` with the episode's
:class:`Example`, :meth:`~Environment.step` with each :class:`ToolCall` the agent makes (one of
the :class:`Tool` s it offers), :meth:`~Environment.check` once at the end (a :class:`Score`:
``value`` in [0, 1] and ``feedback``, the text the learner reflects on) and
:meth:`~Environment.close` always. Commands run in a :class:`SandboxSession` opened from a list of
:class:`SetupFile` (:meth:`Sandboxes.open`); :meth:`SandboxSession.run` answers a
:class:`CommandResult` and :meth:`SandboxSession.final_state` a :class:`WorkState`.

``docs/environments.md`` walks through ``examples/shell_env.py``, an environment built from these
names only.
"""

from combee_fast.protocols.rollouts import Environment, EnvironmentTask
from combee_fast.sandbox.classify import CommandResult
from combee_fast.sandbox.sessions import Sandboxes, SandboxSession
from combee_fast.sandbox.state import SetupFile, WorkState
from combee_fast.schema import Example, Observation, Tool, ToolCall
from combee_fast.tasks.base import Score

__all__ = [
    "CommandResult", "Environment", "EnvironmentTask", "Example", "Observation", "SandboxSession", "Sandboxes",
    "Score", "SetupFile", "Tool", "ToolCall", "WorkState",
]
