"""The terminal task: small shell and data chores solved by an agent in a sandbox.

Splits (bundled, pinned): ``train`` (10 chores per family), ``selection`` (2 per family: pick the
best context, tune), ``test`` (4 per family: report only) and ``val`` (the selection split under
the name runs validate on by default). Each split's SHA-256 is pinned in :data:`SPLIT_SHA256`:
a changed file is refused. Each example's input is the chore's instruction; ``meta`` names its
``family`` (the knowledge unit), its ``chore`` and its ``content`` (a hash of its set-up files and
checks: rows are compared with the test split by it, :func:`~combee_fast.tasks.heldout.row_key`);
there is no target (the checks over the final working directory decide). The chores come from
:mod:`.families`, written by :mod:`.generate`.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import msgspec

from combee_fast.errors import ConfigError, TaskDataError
from combee_fast.protocols.rollouts import Environment
from combee_fast.sandbox.sessions import Sandboxes
from combee_fast.schema import Example
from combee_fast.tasks.ace_format import DATA_DIR
from combee_fast.tasks.base import Score, Split
from combee_fast.tasks.heldout import CONTENT_META
from combee_fast.tasks.splits import SplitFile, select_rows
from combee_fast.tasks.terminal.chores import Chore
from combee_fast.tasks.terminal.environment import TerminalEnvironment

SPLIT_FILES = {"train": "terminal_train.jsonl", "selection": "terminal_selection.jsonl",
               "test": "terminal_test.jsonl"}
"""The bundled split files (in ``combee_fast/tasks/data``), written by :mod:`.generate`."""

SPLIT_SHA256 = {
    "train": "ec06fa55ccdffb5e9f28c781d64f0bde0d6450ff6f4de11f7b182a9a6da1e5d1",
    "selection": "463b09b9b8cb0e28a07bf67d8ca2477d03b2003f1c39dffd089467a1bca645bf",
    "test": "dfc3ca8921745dce9d21b6e39de662dcaf756e86c11a53355d34e3d5246a8ad6",
}
"""The content hash of every bundled split (:func:`combee_fast.tasks.splits.split_sha256`)."""

TERMINAL_ROLES = {"train": "train", "selection": "selection", "val": "selection", "test": "test"}

_DECODER = msgspec.json.Decoder(Chore)


class TerminalTask:
    """The terminal task (module docstring). ``data_dir`` holds the split files (default: the
    bundled ones, whose hashes are checked); ``test_file`` replaces the test split;
    ``tool_wait_s`` (opt-in, default none): seconds each ``run`` step also waits, as a tool whose
    answer waits on I/O (a remote service, a slow disk) would, counted as environment time."""

    name = "terminal"
    sim_world = "combee_fast.sim.terminal:terminal_world"

    def __init__(self, *, data_dir: str | Path = DATA_DIR, test_file: str | Path | None = None,
                 tool_wait_s: str | float = 0.0) -> None:
        try:
            self.tool_wait_s = float(tool_wait_s)
        except ValueError:
            self.tool_wait_s = math.nan
        if not (0.0 <= self.tool_wait_s < math.inf):
            raise ConfigError(f"task terminal: tool_wait_s must be a number of seconds >= 0, got {tool_wait_s!r}")
        folder = Path(data_dir)
        self._files = {split: SplitFile(folder / file) for split, file in SPLIT_FILES.items()}
        self._files["val"] = self._files["selection"]
        if test_file is not None:
            self._files["test"] = SplitFile(Path(test_file))
        self._pinned = Path(data_dir) == DATA_DIR
        self._test_file = test_file is not None
        self.split_roles = TERMINAL_ROLES
        self._chores: dict[str, Chore] = {}

    def split_names(self) -> tuple[str, ...]:
        return tuple(self._files)

    def load(self, split: str) -> Split:
        selected = select_rows(self.name, split, self._files)
        pinned = SPLIT_SHA256.get("selection" if selected.name == "val" else selected.name)
        whole = selected.manifest.split == selected.name
        if self._pinned and pinned and whole and not (selected.name == "test" and self._test_file) \
                and selected.manifest.sha256 != pinned:
            raise TaskDataError(str(selected.path), None, f"split {selected.name!r} changed: sha256 "
                                f"{selected.manifest.sha256}, pinned {pinned}")
        examples = []
        for index, raw in selected.rows:
            try:
                chore = _DECODER.decode(raw.data)
            except msgspec.DecodeError as exc:
                raise TaskDataError(str(selected.path), raw.line, f"not a chore: {exc}") from None
            self._chores[chore.id] = chore
            content = hashlib.sha256(msgspec.json.encode([chore.files, chore.checks])).hexdigest()
            examples.append(Example(index, chore.instruction, None, selected.name,
                                    {"family": chore.family, "chore": chore.id, CONTENT_META: content}))
        return Split(selected.manifest, tuple(examples))

    def chore(self, example: Example) -> Chore:
        """The chore behind ``example`` (its split loaded on first use)."""
        key = example.meta.get("chore", "")
        if key not in self._chores:
            for split in ("train", "selection", "test"):
                self.load(split)
        try:
            return self._chores[key]
        except KeyError:
            raise TaskDataError(f"terminal:{example.split}", example.index, f"no chore {key!r}") from None

    def rollout_source(self) -> None:
        return None

    def score(self, example: Example, answer: str | None) -> Score:
        """A chore is graded on its final working directory, never on an answer alone."""
        raise ValueError(f"terminal chore {example.id} is graded by its environment's checks, not by an answer")

    def environment(self, sandboxes: Sandboxes) -> Environment:
        return TerminalEnvironment(self, sandboxes)
