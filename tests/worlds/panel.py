"""The panel task: chores on a building's control panel, each solved by setting one dial.

Each chore names a room and an occasion (``Room 3: the night shift is in. Set the heating for
it.``); the occasion decides the dial's right setting, by a rule of the chore's family (heating,
lighting, ventilation: the knowledge units of :mod:`.panel_world`). The agent acts in
:class:`PanelEnvironment` with one tool, ``set(value)``; the environment's check grades the
final setting (reward 1 when it is the rule's, else 0, with feedback that names no setting).
There is no target: the check decides. The rows are made here (:func:`chores`), pinned by their
hash as a file's are. The task names its simulated world by path (``sim_world``), as the
built-in tasks name theirs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msgspec

from combee_fast.errors import ConfigError
from combee_fast.schema import Example, Observation, Tool, ToolCall
from combee_fast.tasks.base import Score, Split
from combee_fast.tasks.splits import RawRow, parse_split_spec, pin_rows

OCCASIONS: dict[str, tuple[str, tuple[tuple[str, str, str], ...]]] = {
    "Heating": ("heating", (("the building is empty for the weekend", "frost", "off"),
                            ("the night shift is in", "eco", "comfort"))),
    "Lighting": ("lights", (("the cleaners are in after hours", "half", "full"),
                            ("a film is being shown", "dim", "off"))),
    "Ventilation": ("fan", (("the lab runs its solvent bench", "purge", "low"),
                            ("the meeting room is full", "high", "auto"))),
}
"""Each family: its dial, and each occasion with the right setting and the usual mistake."""

ROOMS = {"train": range(1, 5), "selection": range(5, 6), "test": range(6, 7)}
"""The rooms of each split's chores: every occasion once per room."""

SET_TOOL = Tool("set", "Set the dial the chore names to a value.",
                {"type": "object", "properties": {"value": {"type": "string", "maxLength": 40}},
                 "required": ["value"], "additionalProperties": False})
"""The environment's one tool."""


class Chore(msgspec.Struct, frozen=True):
    """One row: what the agent is told, the family it is of, and the settings the world knows."""

    instruction: str
    family: str
    right: str
    wrong: str


def chores(split: str) -> list[Chore]:
    """The chores of ``split``, in row order."""
    return [Chore(f"Room {room}: {occasion}. Set the {dial} for it.", family, right, wrong)
            for room in ROOMS[split] for family, (dial, occasions) in OCCASIONS.items()
            for occasion, right, wrong in occasions]


class PanelEnvironment:
    """Where one chore is done (module docstring); it needs no sandbox."""

    def __init__(self, task: PanelTask) -> None:
        self._task = task
        self._chore: Chore | None = None
        self._setting: str | None = None

    def tools(self) -> Sequence[Tool]:
        return (SET_TOOL,)

    async def reset(self, task: Example) -> str:
        self._chore, self._setting = self._task.chore(task), None
        return "The panel is on; the dial is at its last setting."

    async def step(self, action: ToolCall) -> Observation:
        arguments = msgspec.json.decode(action.arguments or "{}") if action.name == "set" else None
        value = arguments.get("value") if isinstance(arguments, dict) else None
        if not isinstance(value, str):
            return Observation("the tool is set, with {\"value\": \"...\"}", "bad_action")
        self._setting = value.strip().lower()
        return Observation(f"The dial now reads {self._setting}.")

    async def check(self) -> Score:
        if self._chore is None or self._setting is None:
            return Score(0.0, "the dial was never set")
        if self._setting == self._chore.right:
            return Score(1.0, "the dial is set as the occasion needs")
        return Score(0.0, "the dial is not set as the occasion needs")

    async def close(self) -> None:
        self._chore = None


class PanelTask:
    """The panel task (module docstring)."""

    name = "panel"
    sim_world = "tests.worlds.panel_world:panel_world"

    def __init__(self) -> None:
        self._chores = {c.instruction: c for split in ROOMS for c in chores(split)}

    def split_names(self) -> tuple[str, ...]:
        return tuple(ROOMS)

    def load(self, split: str) -> Split:
        spec = parse_split_spec(split, task=self.name)
        if spec.name not in ROOMS:
            raise ConfigError(f"task panel has no split {spec.name!r}; splits: {', '.join(ROOMS)}")
        rows = [RawRow(line, msgspec.json.encode(chore)) for line, chore in enumerate(chores(spec.name), start=1)]
        selected = pin_rows(self.name, spec, Path(__file__), rows)
        return Split(selected.manifest, tuple(
            Example(index, chore.instruction, None, selected.name, {"family": chore.family})
            for index, chore in ((index, msgspec.json.decode(row.data, type=Chore)) for index, row in selected.rows)))

    def chore(self, example: Example) -> Chore:
        return self._chores[example.input]

    def score(self, example: Example, answer: str | None) -> Score:
        raise ValueError(f"panel chore {example.id} is graded by its environment's check, not by an answer")

    def rollout_source(self) -> None:
        return None

    def environment(self, sandboxes: object) -> PanelEnvironment:
        return PanelEnvironment(self)


def panel() -> PanelTask:
    """The task factory (``--task tests.worlds.panel:panel``)."""
    return PanelTask()
