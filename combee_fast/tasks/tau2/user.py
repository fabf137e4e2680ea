"""The tau2 tasks' user simulator: the customer as a model role of its own, ``user``.

:data:`USER` is the role (pool ``simulate``): its endpoint is ``--role-endpoint user=URL`` (else
the run's), its sampling ``[sampling.user]``, its calls counted and kept apart under ``user`` in
``calls.json`` and the ledger, never mixed with the learner's roles. :class:`ModelCustomer` is the
customer of one episode: a system prompt (``prompts/user_system.txt``) holding the task's
``user_scenario``, then the conversation with the roles turned around (the agent's messages are
the customer's ``user`` turns, the customer's own replies its ``assistant`` turns); it opens as a
customer answering the agent's greeting. Each reply is one call through the engine
(the environment's ``use_chat``): it is on the episode's critical path, and its seconds are counted
in the step's environment seconds (:attr:`ModelCustomer.usages`). A call that fails raises
:class:`CustomerFailed` (the episode fails as ``user_call``).
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

from combee_fast.endpoint.calls import ChatCall, ChatRequest
from combee_fast.engine.rng import derive_seed
from combee_fast.errors import CustomerFailed
from combee_fast.schema import Message, Usage
from combee_fast.tasks.tau2.domain import Instructions, Tau2Task

USER_ROLE = "user"
USER_MAX_TOKENS = 400
USER: dict[str, Any] = {"name": USER_ROLE, "pool": "simulate", "max_tokens": USER_MAX_TOKENS, "temperature": 0.0,
                        "prompts": ["tasks/tau2/prompts/user_system.txt"]}
"""The customer's role (module docstring), as the fields of a :class:`~combee_fast.roles.spec.Role`
(:func:`~combee_fast.roles.spec.task_roles` builds it)."""

SYSTEM = string.Template((Path(__file__).parent / "prompts" / "user_system.txt").read_text(encoding="utf-8"))

GREETING = "Hi! How can I help you today?"
"""The agent's first words, as tau2 opens every conversation."""

MAX_REPLY_CHARS = 2000

def scenario_block(task: Tau2Task) -> str:
    """The task's ``user_scenario`` as the customer's prompt shows it."""
    instructions = task.user_scenario.instructions
    if isinstance(instructions, Instructions):
        parts = [("Why you are calling", instructions.reason_for_call), ("What you know", instructions.known_info),
                 ("What you do not know", instructions.unknown_info),
                 ("How to behave", instructions.task_instructions)]
        text = "\n\n".join(f"{title}:\n{body.strip()}" for title, body in parts if body)
    else:
        text = str(instructions or "")
    if task.user_scenario.persona:
        text = f"Who you are:\n{task.user_scenario.persona.strip()}\n\n{text}"
    return text


class ModelCustomer:
    """One episode's customer played by the ``user`` role (module docstring)."""

    def __init__(self, chat_call: ChatCall, seed: int) -> None:
        self._chat_call = chat_call
        self._seed = seed
        self._messages: list[Message] = []
        self.usages: list[Usage] = []  # every call's, in order

    async def _turn(self) -> str:
        request = ChatRequest(role=USER_ROLE, messages=tuple(self._messages), max_tokens=USER_MAX_TOKENS,
                              temperature=0.0, seed=derive_seed(self._seed, USER_ROLE, len(self.usages)))
        result = await self._chat_call(request)
        self.usages.append(result.usage)
        if result.error is not None or not (result.text or "").strip():
            problem = f"{result.error.label}: {result.error.message}" if result.error else "an empty reply"
            raise CustomerFailed(f"the customer's call failed ({problem})")
        reply = (result.text or "").strip()[:MAX_REPLY_CHARS]
        self._messages.append(Message("assistant", reply))
        return reply

    async def open(self, task: Tau2Task) -> str:
        self._messages = [Message("system", SYSTEM.safe_substitute(scenario=scenario_block(task)).rstrip("\n")), Message("user", GREETING)]
        return await self._turn()

    async def reply(self, message: str) -> str:
        self._messages.append(Message("user", message))
        return await self._turn()
