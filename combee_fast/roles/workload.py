"""The prompts a start-up probe sends to measure an endpoint on the work a role will give it.

A short probe prompt measures how fast a server *generates*; a role's real calls also read a
long prompt first, and on a CPU reading is as compute-bound as generating, so their batching
curve is another one (the 0.5B on llama.cpp, 2 cores, 4 slots: 2.11x at four requests with the
short prompt, 1.82x with Formula's generator prompts; 1.03x on another host of the same kind).
:func:`workload_prompts` are the role's own: its instructions (its first prompt file) as the
system message, then the learned context the run starts from and one task input per prompt, as
its requests carry them. Each prompt holds another input, so the server's prompt cache spares
no probe request more than it spares the role's own calls (the shared instructions and context).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from combee_fast.roles.spec import Role
from combee_fast.schema import Message

PACKAGE = Path(__file__).resolve().parents[1]
"""The folder ``Role.prompts`` paths are relative to."""


def role_instructions(role: Role) -> str:
    """The text of ``role``'s first prompt file ("" when it declares none or it cannot be read,
    e.g. a plug-in's path relative to its own package)."""
    if not role.prompts:
        return ""
    try:
        return (PACKAGE / role.prompts[0]).read_text(encoding="utf-8")
    except OSError:
        return ""


def workload_prompts(role: Role, context: str, inputs: Sequence[str]) -> list[tuple[Message, ...]]:
    """One prompt per task input, shaped as ``role``'s calls are (module docstring)."""
    instructions = role_instructions(role)
    head = (Message("system", instructions),) if instructions else ()
    return [(*head, Message("user", f"{context}\n\n{text}" if context else text)) for text in inputs]
