"""FiNER: XBRL tagging from ACE; each example asks for the US-GAAP tags of 4 numeric entities.

Only ACE's FiNER *validation* file (500 rows) is bundled, so this task cuts it in two:
``train`` = file rows [0:300] and ``val`` = file rows [300:500]. ``val`` is further cut in two
held-out roles: ``selection`` = file rows [300:400] (pick the best playbook, tune) and ``test`` =
file rows [400:500] (report only); ``val`` stays as it was and overlaps ``test``. Example indices
count within the split (``val`` row 0 is file row 300). Scores are per-entity tag accuracy (fraction of the
entities whose tag is right). ``meta["tags"]`` is the target (comma-separated tags, one per entity)
and ``meta["entities"]`` a JSON array of the entity strings in question order.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from combee_fast.schema import Example
from combee_fast.tasks.ace_format import DATA_DIR, AceRow, load_ace_split
from combee_fast.tasks.base import Score, Split
from combee_fast.tasks.scorers import quote
from combee_fast.tasks.splits import SplitFile

FINER_FILE = "finer_val_batched_500_samples.jsonl"
FINER_SPLITS = {"train": (0, 300), "val": (300, 500), "selection": (300, 400), "test": (400, 500)}
FINER_ROLES = {"train": "train", "val": "selection", "selection": "selection", "test": "test"}

_ENTITY = re.compile(r'^\s*\d+\.\s*What is (?:the )?best tag for entity "(.*?)" in sentence:', re.MULTILINE)
_TAG_PUNCTUATION = " \t\r\n\"'`.;[]"


def finer_entities(question: str) -> list[str]:
    """The entity strings of a FiNER question, in question order."""
    return _ENTITY.findall(question)


def split_tags(text: str) -> list[str]:
    """Tags of an answer or target: comma-separated (newline-separated if it has no comma), trimmed."""
    parts = text.split(",") if "," in text else text.splitlines()
    return [part.strip(_TAG_PUNCTUATION) for part in parts if part.strip(_TAG_PUNCTUATION)]


def _meta(row: AceRow) -> dict[str, str] | str:
    tags = split_tags(row.target)
    entities = finer_entities(row.context)
    if not tags:
        return "empty target: no tags"
    if len(entities) != len(tags):
        return f"the question names {len(entities)} entities but the target has {len(tags)} tags"
    return {"tags": ",".join(tags), "entities": orjson.dumps(entities).decode()}


class FinerTask:
    """The ACE FiNER task. ``data_dir`` holds the FiNER file (default: the bundled copy);
    ``test_file`` (a JSONL file in the same format, e.g. held-out data kept outside the project)
    replaces the bundled ``test`` split, whole."""

    name = "finer"
    sim_world = "combee_fast.sim.finer:finer_world"

    def __init__(self, *, data_dir: str | Path = DATA_DIR, test_file: str | Path | None = None) -> None:
        path = Path(data_dir) / FINER_FILE
        self._files = {split: SplitFile(path, first, stop) for split, (first, stop) in FINER_SPLITS.items()}
        if test_file is not None:
            self._files["test"] = SplitFile(Path(test_file))
        self.split_roles = FINER_ROLES

    def split_names(self) -> tuple[str, ...]:
        return tuple(self._files)

    def load(self, split: str) -> Split:
        return load_ace_split(self.name, split, self._files, _meta)

    def rollout_source(self) -> None:
        """Examples only: the learner generates its own rollouts."""
        return None

    def score(self, example: Example, answer: str | None) -> Score:
        if example.target is None:
            raise ValueError(f"finer example {example.id} has no target")
        expected = split_tags(example.target)
        entities = orjson.loads(example.meta["entities"]) if "entities" in example.meta else []
        given = split_tags(answer) if answer else []
        if not given:
            return Score(0.0, f"No tags were given; expected {len(expected)} tags: {', '.join(expected)}.")
        wrong = []
        for position, want in enumerate(expected):
            got = given[position] if position < len(given) else None
            if got != want:
                entity = f' "{entities[position]}"' if position < len(entities) else ""
                answered = "gave no tag" if got is None else f"answered {quote(got)}"
                wrong.append(f"entity {position + 1}{entity}: you {answered}, expected {want}")
        value = (len(expected) - len(wrong)) / len(expected)
        count_note = ""
        if len(given) != len(expected):
            count_note = f" You gave {len(given)} tags for {len(expected)} entities."
        if not wrong:
            return Score(value, f"Correct: all {len(expected)} tags match.{count_note}")
        return Score(value, f"{len(wrong)} of {len(expected)} tags wrong: " + "; ".join(wrong) + "." + count_note)
