"""Formula: numeric financial-formula questions from ACE, scored by equality at two decimals.

Splits: ``train`` (500 rows, 50 distinct formulas) and ``val`` (300 rows), bundled. The val file
is also cut in two held-out roles: ``selection`` (its rows [0:200]: pick the best playbook, tune)
and ``test`` (its rows [200:300]: report only). ``val`` itself is kept as it always was, all 300
rows, for existing runs; it overlaps ``test``, so a disciplined run selects on ``selection``.
Each example's ``meta["formula"]`` is the formula name the question asks for ("Use formula <NAME>
to answer").
"""

from __future__ import annotations

import re
from pathlib import Path

from combee_fast.schema import Example
from combee_fast.tasks.ace_format import DATA_DIR, AceRow, load_ace_split
from combee_fast.tasks.base import Score, Split
from combee_fast.tasks.scorers import NumericScorer
from combee_fast.tasks.splits import SplitFile

FORMULA_FILES = {"train": "formula_train_subset_500.jsonl", "val": "formula_val_subset_300.jsonl"}
FORMULA_HELD_OUT = {"selection": ("val", 0, 200), "test": ("val", 200, 300)}
"""Held-out splits carved from a bundled file: name -> (file key, first row, stop row)."""
FORMULA_ROLES = {"train": "train", "val": "selection", "selection": "selection", "test": "test"}
FORMULA_DECIMALS = 2

_FORMULA_NAME = re.compile(r"\bUse\s+(?:the\s+)?formula\s+(.+?)\s+to\s+answer\b", re.IGNORECASE | re.DOTALL)


def formula_name(question: str) -> str | None:
    """The formula name in "Use formula <NAME> to answer ...", whitespace collapsed; ``None`` if absent."""
    match = _FORMULA_NAME.search(question)
    if match is None:
        return None
    return " ".join(match[1].split()) or None


class FormulaTask:
    """The ACE Formula task. ``data_dir`` holds the two split files (default: the bundled copy);
    ``test_file`` (a JSONL file in the same format, e.g. held-out data kept outside the project)
    replaces the bundled ``test`` split, whole."""

    name = "formula"

    def __init__(self, *, data_dir: str | Path = DATA_DIR, test_file: str | Path | None = None) -> None:
        folder = Path(data_dir)
        self._files = {split: SplitFile(folder / file) for split, file in FORMULA_FILES.items()}
        for split, (key, first, stop) in FORMULA_HELD_OUT.items():
            self._files[split] = SplitFile(folder / FORMULA_FILES[key], first, stop)
        if test_file is not None:
            self._files["test"] = SplitFile(Path(test_file))
        self.split_roles = FORMULA_ROLES
        self._scorer = NumericScorer(decimals=FORMULA_DECIMALS)

    def split_names(self) -> tuple[str, ...]:
        return tuple(self._files)

    def load(self, split: str) -> Split:
        return load_ace_split(self.name, split, self._files, self._meta)

    def _meta(self, row: AceRow) -> dict[str, str] | str:
        name = formula_name(row.context)
        if name is None:
            return "no 'Use formula <NAME> to answer' in the context"
        return self._scorer.target_problem(row.target) or {"formula": name}

    def rollout_source(self) -> None:
        """Examples only: the learner generates its own rollouts."""
        return None

    def score(self, example: Example, answer: str | None) -> Score:
        if example.target is None:
            raise ValueError(f"formula example {example.id} has no target")
        return self._scorer.score(answer, example.target)
