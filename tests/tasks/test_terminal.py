"""The terminal task: enough chores and families, pinned splits that regenerate byte for byte, a
refused test split, and (in real sandboxes) every oracle passing and every mistake failing."""

from __future__ import annotations

import asyncio
import shutil
from collections import Counter
from pathlib import Path

import pytest

from combee_fast.config import SandboxConfig
from combee_fast.errors import ConfigError, TaskDataError
from combee_fast.protocols import EnvironmentTask
from combee_fast.sandbox.sessions import Sandboxes
from combee_fast.tasks.ace_format import DATA_DIR
from combee_fast.tasks.heldout import check_disjoint, check_use, row_keys
from combee_fast.tasks.registry import get_task
from combee_fast.tasks.terminal.chores import Chore, grade
from combee_fast.tasks.terminal.generate import write_splits
from combee_fast.tasks.terminal.task import SPLIT_FILES, TerminalTask


def _chores() -> list[Chore]:
    task = TerminalTask()
    return [task.chore(e) for split in ("train", "selection", "test") for e in task.load(split).examples]


def test_at_least_150_chores_from_at_least_15_families_in_every_split() -> None:
    chores = _chores()
    assert len(chores) >= 150 and len({c.id for c in chores}) == len(chores)
    families = Counter(c.family for c in chores)
    assert len(families) >= 15
    task = TerminalTask()
    for split in ("train", "selection", "test"):
        assert {e.meta["family"] for e in task.load(split).examples} == set(families)


def test_the_bundled_splits_are_what_the_generator_writes(tmp_path: Path) -> None:
    write_splits(tmp_path)
    for file in SPLIT_FILES.values():
        assert (tmp_path / file).read_bytes() == (DATA_DIR / file).read_bytes(), file


def test_a_changed_split_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import combee_fast.tasks.terminal.task as module

    for file in SPLIT_FILES.values():
        shutil.copy(DATA_DIR / file, tmp_path / file)
    lines = (tmp_path / SPLIT_FILES["test"]).read_text().splitlines(keepends=True)
    (tmp_path / SPLIT_FILES["test"]).write_text("".join(lines[1:]))
    monkeypatch.setattr(module, "DATA_DIR", tmp_path)
    with pytest.raises(TaskDataError, match="split 'test' changed"):
        module.TerminalTask(data_dir=tmp_path).load("test")


def test_the_test_split_is_for_reports_only() -> None:
    task = get_task("terminal")
    assert isinstance(task, EnvironmentTask)
    assert check_use(task, "test", "report") == "test"
    with pytest.raises(ConfigError, match="role test"):
        check_use(task, "test", "select")
    assert check_use(task, "val", "select") == "selection"


def test_every_chore_is_distinct_by_content_and_learning_splits_are_disjoint_from_test() -> None:
    task = get_task("terminal")
    splits = {name: task.load(name) for name in ("train", "selection", "test")}
    keys = {name: row_keys(split) for name, split in splits.items()}
    assert all(len(keys[name]) == len(split.examples) for name, split in splits.items())
    assert not keys["train"] & keys["test"] and not keys["selection"] & keys["test"]
    assert not keys["train"] & keys["selection"]
    check_disjoint(task, splits["train"], "train")
    check_disjoint(task, splits["selection"], "select")
    same_instruction = {e.input for e in splits["train"].examples} & {e.input for e in splits["test"].examples}
    assert same_instruction  # rows are told apart by their files and checks, not by the instruction alone


def test_a_chore_has_no_target_and_is_not_scored_by_an_answer() -> None:
    task = TerminalTask()
    example = task.load("train[0:1]").examples[0]
    assert example.target is None and example.meta["family"] == "numeric_sort"
    with pytest.raises(ValueError, match="graded by its environment"):
        task.score(example, "done")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")
async def test_every_oracle_passes_and_every_mistake_fails_in_the_sandbox() -> None:
    sandboxes = Sandboxes(SandboxConfig(), step_timeout_s=20.0, uid_count=8)
    room = asyncio.Semaphore(4)

    async def graded(chore: Chore, commands: tuple[str, ...]) -> float:
        async with room:
            session = await sandboxes.open(chore.setup())
            try:
                for command in commands:
                    await session.run(command, timeout_s=20.0)
                return grade(chore, await session.final_state())[0]
            finally:
                await session.close()

    chores = _chores()
    async with sandboxes:
        oracles = await asyncio.gather(*(graded(c, c.oracle) for c in chores))
        mistakes = await asyncio.gather(*(graded(c, m) for c in chores for m in c.mistakes))
    assert [c.id for c, reward in zip(chores, oracles) if reward != 1.0] == []
    failing = [(c.id, m) for c in chores for m in c.mistakes]
    assert [pair for pair, reward in zip(failing, mistakes) if reward != 0.0] == []
