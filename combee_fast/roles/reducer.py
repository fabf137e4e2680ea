"""Reducer: merges k curator proposals made against the same base playbook into one set of ops.

User message tags (each on its own line, content between): ``<playbook>``, ``<proposals>`` (one
JSON object per line: ``{"proposal": i, "operations": [...]}``, ``i`` counting from 1, operations in
the curator's output format). Output: the same format, parsed by :func:`combee_fast.roles.ops.parse_ops`.
"""

from __future__ import annotations

from typing import Any, Sequence

from combee_fast.roles.base import EMPTY_PLAYBOOK, fill, load_prompt
from combee_fast.roles.ops import OPS_SCHEMA, ops_json_line
from combee_fast.schema import Message, Op

REDUCER_MAX_TOKENS = 2048
REDUCER_SCHEMA: dict[str, Any] = OPS_SCHEMA
REDUCER_SYSTEM_PROMPT = load_prompt("reducer.txt")
REDUCER_USER_TEMPLATE = load_prompt("reducer_user.txt")


def reducer_messages(playbook_text: str, proposals: Sequence[Sequence[Op]]) -> tuple[Message, ...]:
    """System + user messages merging ``proposals`` (each one curator call's ops, in group order)."""
    lines = [ops_json_line(ops, proposal=number) for number, ops in enumerate(proposals, start=1)]
    user = fill(
        REDUCER_USER_TEMPLATE,
        playbook=playbook_text if playbook_text.strip() else EMPTY_PLAYBOOK,
        proposals="\n".join(lines) or "(no proposals)",
    )
    return (Message("system", REDUCER_SYSTEM_PROMPT), Message("user", user))
