"""The artifact GEPA learns: named text components (e.g. a system prompt), immutable."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from combee_fast.errors import ConfigError
from combee_fast.files import read_regular, write_atomic
from combee_fast.roles.base import load_prompt

SYSTEM_PROMPT = "system_prompt"
"""The component name of a single-prompt candidate."""

class Candidate(msgspec.Struct, frozen=True):
    """Named text components and the pool indices of the candidates it was derived from.

    ``render()`` is the system prompt a solver call sends: the one component's text alone, or
    every component under a ``## <name>`` header, in name order.
    """

    components: dict[str, str]
    parents: tuple[int, ...] = ()

    @classmethod
    def seed(cls) -> Candidate:
        """The starting candidate: our seed instruction as the system prompt."""
        return cls({SYSTEM_PROMPT: load_prompt("seed_instruction.txt", beside=__file__)})

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self.components))

    def render(self) -> str:
        if len(self.components) == 1:
            return next(iter(self.components.values()))
        return "\n\n".join(f"## {name}\n{self.components[name]}" for name in self.names())

    def replaced(self, name: str, text: str, *, parent: int) -> Candidate:
        """A child: this candidate with component ``name`` set to ``text``, derived from ``parent``."""
        if name not in self.components:
            raise KeyError(f"no component {name!r}; have {', '.join(self.names())}")
        return Candidate({**self.components, name: text}, (parent,))

    def to_bytes(self) -> bytes:
        """This candidate as candidate-file JSON (what :meth:`save` writes)."""
        return msgspec.json.format(msgspec.json.encode(self), indent=2)

    def save(self, path: str | os.PathLike[str]) -> None:
        write_atomic(Path(path), self.to_bytes())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Candidate:
        """The candidate saved at ``path``; :class:`~combee_fast.errors.ConfigError` naming the
        path when it cannot be read or is not a candidate."""
        try:
            return msgspec.json.decode(read_regular(path), type=cls)
        except OSError as exc:
            raise ConfigError(f"{path}: not a candidate file: {exc.strerror or exc}") from None
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ConfigError(f"{path}: not a candidate file: {exc}") from None


def is_candidate_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` holds a JSON object with ``components`` (a GEPA run's final/best.json)."""
    try:
        data = msgspec.json.decode(read_regular(path))
    except (OSError, msgspec.DecodeError):
        return False
    return isinstance(data, dict) and "components" in data
