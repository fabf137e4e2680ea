"""What TextGrad learns: a prompt variable, named text parts read as lines, immutable.

A :class:`PromptVariable` is the artifact the run loop carries (numbered by ``version``, sized by
its non-blank lines) and also what users deploy (``final.json``, ``best.json``): ``render()`` is
the system prompt a forward call sends. An edit (:class:`LineEdit`) adds one line to a part or
removes one; :meth:`PromptVariable.edited` applies a set of them at once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import msgspec

from combee_fast.errors import ConfigError
from combee_fast.files import write_atomic
from combee_fast.roles.base import load_prompt

SYSTEM_PROMPT = "system_prompt"
"""The part name of a single-part variable."""




class LineEdit(msgspec.Struct, frozen=True):
    """One change to a part: ``line`` added to ``part`` (at its end), or removed from it."""

    part: str
    line: str
    remove: bool = False


class PromptChange(msgspec.Struct, frozen=True):
    """What one apply did (a :class:`~combee_fast.protocols.ChangeReport`): the lines added, the
    edits turned down (a line already there, a part the variable lacks, a blank line) and the
    lines removed."""

    added_ids: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()


class PromptDelta(msgspec.Struct, frozen=True):
    """One apply that changed the variable, as ``deltas.jsonl`` keeps it: the version it made,
    the call that proposed it and the lines added and removed, ``(part, line)`` each."""

    version: int
    source: str
    added: tuple[tuple[str, str], ...]
    removed: tuple[tuple[str, str], ...]


class PromptVariable(msgspec.Struct, frozen=True):
    """Named text parts (``parts``: name -> text) and the ``version`` of this value.

    ``render()`` is the one part's text alone, or every part under a ``## <name>`` header, in
    name order. ``len()`` counts the non-blank lines of every part.
    """

    parts: dict[str, str]
    version: int = 0

    @classmethod
    def seed(cls) -> PromptVariable:
        """The starting variable: our seed instruction as the system prompt."""
        return cls({SYSTEM_PROMPT: load_prompt("seed_prompt.txt", beside=__file__)})

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self.parts))

    def render(self) -> str:
        if len(self.parts) == 1:
            return next(iter(self.parts.values()))
        return "\n\n".join(f"## {name}\n{self.parts[name]}" for name in self.names())

    def lines(self) -> list[tuple[str, str]]:
        """Every non-blank line as ``(part, line)``, parts in name order: the numbering the
        optimizer's prompt shows (line ``n`` is ``lines()[n - 1]``)."""
        return [(name, line) for name in self.names() for line in self.parts[name].split("\n") if line.strip()]

    def __len__(self) -> int:
        return len(self.lines())

    def edited(self, edits: Sequence[LineEdit], source: str) -> tuple[PromptVariable, PromptChange, PromptDelta | None]:
        """This variable with every removal of ``edits`` applied, then every addition (each line
        once, appended to its part); the next version when anything changed, else this one."""
        parts = {name: text.split("\n") for name, text in self.parts.items()}
        removed, added, rejected = [], [], []
        for edit in edits:
            if not edit.remove:
                continue
            lines = parts.get(edit.part)
            if lines is None or edit.line not in lines:
                rejected.append(edit.line)
                continue
            parts[edit.part] = [line for line in lines if line != edit.line]
            removed.append((edit.part, edit.line))
        for edit in edits:
            if edit.remove:
                continue
            lines = parts.get(edit.part)
            if lines is None or not edit.line.strip() or edit.line in lines or "\n" in edit.line:
                rejected.append(edit.line)
                continue
            lines.append(edit.line)
            added.append((edit.part, edit.line))
        change = PromptChange(tuple(line for _, line in added), tuple(rejected), tuple(line for _, line in removed))
        if not added and not removed:
            return self, change, None
        variable = PromptVariable({name: "\n".join(lines) for name, lines in parts.items()}, self.version + 1)
        return variable, change, PromptDelta(variable.version, source, tuple(added), tuple(removed))

    def renumbered(self, version: int) -> PromptVariable:
        """The same parts numbered ``version``, not below this one's (``ValueError``): how an
        online learner's release gate keeps version numbers unique after a rollback."""
        if version < self.version:
            raise ValueError(f"a prompt variable cannot be renumbered down, from version {self.version} to {version}")
        return self if version == self.version else msgspec.structs.replace(self, version=version)

    def to_bytes(self) -> bytes:
        """This variable as prompt-file JSON (what :meth:`save` writes)."""
        return msgspec.json.format(msgspec.json.encode(self), indent=2)

    def save(self, path: str | os.PathLike[str]) -> None:
        write_atomic(Path(path), self.to_bytes())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PromptVariable:
        """The variable saved at ``path``; :class:`~combee_fast.errors.ConfigError` naming the
        path when it cannot be read or is not a prompt variable."""
        try:
            variable = msgspec.json.decode(Path(path).read_bytes(), type=cls)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ConfigError(f"{path}: not a prompt-variable file: {exc}") from None
        if not variable.parts:
            raise ConfigError(f"{path}: a prompt variable needs at least one part")
        return variable


def is_variable_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` holds a JSON object with ``parts`` (a TextGrad run's final/best.json)."""
    try:
        data = msgspec.json.decode(Path(path).read_bytes())
    except (OSError, msgspec.DecodeError):
        return False
    return isinstance(data, dict) and "parts" in data
