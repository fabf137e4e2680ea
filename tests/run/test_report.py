"""The run's page, from a real run on the simulated endpoint, and from a failed one."""

from __future__ import annotations

import re

import msgspec

from combee_fast.config import FaultConfig, SessionConfig, SimConfig, TaskConfig, TrainConfig
from combee_fast.errors import CallsFailed
from combee_fast.record.provenance import command_line, git_commit, provenance
from combee_fast.record.rundir import RunDir, read_run
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.session import open_session

CONFIG = SessionConfig(task=TaskConfig(train_split="train[0:24]", val_split="selection[0:20]"),
                       sim=SimConfig("flat", 1e-4), train=TrainConfig(eval_every=1))


async def test_a_run_directory_gets_its_page_prompt_and_provenance(tmp_path) -> None:
    run_dir = RunDir(tmp_path / "run")
    async with open_session(CONFIG) as session:
        result = await session.train(plan=FixedBatch(8), run_dir=run_dir)
    run_dir.close()
    record = read_run(tmp_path / "run")
    assert record.prompt == result.best.render() + "\n"
    page = (tmp_path / "run" / "report.md").read_text()
    assert page.startswith(f"# combee learn: ace combee on formula\n\n**Done after step {result.steps}: 1 epoch(s) done**")
    assert f"{result.rollouts} | {result.calls} | {result.tokens:,} |" in page
    assert re.search(rf"\| generator \| sim at http://127\.0\.0\.1:\d+/v1 \| {result.counts.calls['generator']} \| 0 \| 0 \|",
                     page)  # the role, the model and endpoint that served it, its calls
    assert (tmp_path / "run" / "curve.png").read_bytes()[:4] == b"\x89PNG"
    provenance = record.provenance
    assert provenance is not None and provenance["ended"] >= provenance["started"]
    assert [s["split"] for s in provenance["splits"]] == ["train[0:24]", "selection[0:20]"]


async def test_a_failed_run_still_gets_a_page_saying_why(tmp_path) -> None:
    config = msgspec.structs.replace(CONFIG, sim=SimConfig("flat", 1e-4, faults=FaultConfig(rate_500=1.0)),
                                     transport=msgspec.structs.replace(CONFIG.transport, max_retries=0))
    run_dir = RunDir(tmp_path / "run")
    try:
        async with open_session(config) as session:
            try:
                await session.train(plan=FixedBatch(12), run_dir=run_dir)
            except CallsFailed:
                pass
            else:
                raise AssertionError("every call failed, the run did not")
    finally:
        run_dir.close()
    page = (tmp_path / "run" / "report.md").read_text()
    assert "**Failed (exit 3): step 1: 12 of 12 calls failed" in page
    assert re.search(r"\| generator \| sim at http://127\.0\.0\.1:\d+/v1 \| 12 \| 5xx 12 \| 0 \|", page)
    assert (tmp_path / "run" / "prompt.txt").is_file()


def test_provenance_names_the_command_and_the_commit_of_a_checkout(tmp_path) -> None:
    assert command_line(["/usr/bin/combee", "learn", "--endpoint", "http://u:secret@h/v1"]) == \
        "combee learn --endpoint http://h/v1"
    assert git_commit(tmp_path) is None  # not a checkout
    assert provenance(seed=3).seed == 3 and provenance().host
