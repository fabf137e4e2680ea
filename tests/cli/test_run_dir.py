"""One writer per run directory and nothing lost (real ``combee learn`` processes): two resumes at
once (one refused, the run written once), an ``--overwrite`` whose endpoint fails every call
(the previous run kept), ``calls.json`` and the totals over every process of a run, resumes
refused in one line when a run file or the seed changed, a batch plan repeated from an earlier
run's decisions."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from combee_fast.errors import EXIT_CALLS_FAILED, EXIT_OK, EXIT_USAGE
from combee_fast.ace.playbook.deltalog import final_bullets, read_delta_log
from tests.hostile import HostileServer, respond

RUN = ["--task", "formula", "--method", "combee", "--batch-size", "20", "--epochs", "2",
       "--train-split", "train[0:100]", "--val-split", "val[0:30]", "--eval-every", "3", "--quiet"]


def _combee(*args: str) -> list[str]:
    return [sys.executable, "-m", "combee_fast.cli", *args]


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_combee(*args), capture_output=True, text=True, timeout=timeout)


def _lines(path: Path) -> int:
    try:
        return len(path.read_bytes().splitlines())
    except FileNotFoundError:
        return 0


def _stopped_at(out: Path, at_step: int, sig: signal.Signals = signal.SIGTERM, *extra: str) -> None:
    """A run of ``RUN`` (and ``extra``) in ``out``, sent ``sig`` once ``at_step`` steps are in its ledger."""
    process = subprocess.Popen(_combee("learn", *RUN, *extra, "--out", str(out)), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _lines(out / "ledger.jsonl") < at_step and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert process.poll() is None, "the run ended before it could be stopped"
    process.send_signal(sig)
    process.wait(timeout=120)


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run-dir") / "whole"
    done = _run("learn", *RUN, "--out", str(out))
    assert done.returncode == EXIT_OK, done.stderr
    return out


def _replayed_bullets(out: Path) -> dict[str, str]:
    return {bullet_id: state.content for bullet_id, state in final_bullets(read_delta_log(out / "deltas.jsonl")).items()}


def _final_bullets(out: Path) -> dict[str, str]:
    return {bullet["id"]: bullet["content"] for bullet in json.loads((out / "final.json").read_bytes())["bullets"]}


@pytest.mark.slow
def test_two_resumes_at_once_one_refused_and_the_run_written_once(whole: Path, tmp_path: Path) -> None:
    out = tmp_path / "killed"
    _stopped_at(out, random.Random().randint(1, 6), signal.SIGKILL)
    resumes = [subprocess.Popen(_combee("learn", "--resume", str(out), "--quiet"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    ended = [(resume.wait(timeout=300), resume.stderr.read()) for resume in resumes]  # type: ignore[union-attr]
    assert sorted(code for code, _ in ended) == [EXIT_OK, EXIT_USAGE], ended
    refused = next(err for code, err in ended if code == EXIT_USAGE)
    assert refused.count("\n") == 1 and "is in use by another combee process" in refused
    assert _lines(out / "ledger.jsonl") == _lines(whole / "ledger.jsonl")
    assert _lines(out / "deltas.jsonl") == _lines(whole / "deltas.jsonl")
    assert (out / "final.json").read_bytes() == (whole / "final.json").read_bytes()
    assert _replayed_bullets(out) == _final_bullets(out)


@pytest.mark.slow
def test_calls_json_and_every_total_count_every_process_of_the_run(tmp_path: Path) -> None:
    # Chains carried past a checkpoint are run again by a resume (the same calls, really made
    # again): with every round inside its step nothing is carried, so a resumed run makes exactly
    # the calls of an uninterrupted one, and its counts must be those.
    config = tmp_path / "in-step.toml"
    config.write_text("[map]\nsync_rounds = 3\nmax_rounds = 3\n")
    whole = tmp_path / "whole"
    done = _run("learn", *RUN, "--config", str(config), "--out", str(whole))
    assert done.returncode == EXIT_OK, done.stderr
    out = tmp_path / "killed"
    _stopped_at(out, 4, signal.SIGKILL, "--config", str(config))
    resumed = _run("learn", "--resume", str(out), "--quiet")
    assert resumed.returncode == EXIT_OK, resumed.stderr
    assert json.loads((out / "calls.json").read_bytes()) == json.loads((whole / "calls.json").read_bytes())
    totals = ("samples", "calls", "tokens", "rollouts", "accounting")
    ours, theirs = (json.loads((run / "summary.json").read_bytes()) for run in (out, whole))
    assert {k: ours[k] for k in totals} == {k: theirs[k] for k in totals}
    again = _run("learn", "--resume", str(out), "--quiet")  # a finished run resumed: nothing more, nothing less
    assert again.returncode == EXIT_OK, again.stderr
    assert json.loads((out / "calls.json").read_bytes()) == json.loads((whole / "calls.json").read_bytes())


def test_an_overwrite_whose_endpoint_fails_every_call_keeps_the_previous_run(whole: Path, tmp_path: Path) -> None:
    out = tmp_path / "good"
    subprocess.run(["cp", "-r", str(whole), str(out)], check=True)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with HostileServer(respond(500, '{"error": "down"}')) as server:
        done = _run("learn", *RUN, "--endpoint", server.url, "--model", "m", "--response-format", "none",
                    "--out", str(out), "--overwrite")
    assert done.returncode == EXIT_CALLS_FAILED and done.stderr.count("\n") == 1, done.stderr
    assert f"the previous run in {out} is kept" in done.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".lock"} == \
        {name: data for name, data in before.items() if name != ".lock"}
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("good.unswapped-")]
    assert len(aside) == 1 and f"{aside[0]}/final.json holds what was learned so far" in done.stderr
    assert _lines(aside[0] / "errors.jsonl") > 0  # the failed run is kept beside it, every failure recorded
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(("edit", "said"), [
    (lambda run: run / "config.json", "config.json changed since the checkpoint"),
    (lambda run: run / "splits.json", "splits.json changed since the checkpoint"),
    (lambda run: run / "ledger.jsonl", "ledger.jsonl is"),
    (lambda run: run / "deltas.jsonl", "deltas.jsonl is"),
])
def test_a_resume_that_finds_a_run_file_changed_is_refused_in_one_line(tmp_path: Path, edit, said: str) -> None:
    out = tmp_path / "stopped"
    _stopped_at(out, 3)
    path = edit(out)
    data = path.read_bytes()
    if path.name == "config.json":  # the batch size of a run half done, or its seed
        path.write_bytes(data.replace(b'"batch_size": 20', b'"batch_size": 7'))
    elif path.name == "splits.json":
        path.write_bytes(b"[]")
    else:
        path.write_bytes(data[: len(data) // 2])  # cut
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    done = _run("learn", "--resume", str(out), "--quiet")
    assert done.returncode == EXIT_USAGE and done.stderr.count("\n") == 1, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # nothing cut, nothing lost


def test_a_seed_edited_before_resume_is_refused_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "stopped"
    _stopped_at(out, 2)
    config = out / "config.json"
    config.write_bytes(config.read_bytes().replace(b'"seed": 0', b'"seed": 5'))
    done = _run("learn", "--resume", str(out), "--quiet")
    assert done.returncode == EXIT_USAGE and done.stderr.count("\n") == 1, done.stderr
    assert "config.json changed since the checkpoint" in done.stderr and "seed" in done.stderr


@pytest.mark.slow
def test_plan_from_repeats_an_auto_run_without_a_replay_cache(tmp_path: Path) -> None:
    auto = ["--task", "formula", "--method", "combee", "--batch-size", "auto", "--train-split", "train[0:300]",
            "--val-split", "val[0:30]", "--quiet"]
    first = _run("learn", *auto, "--out", str(tmp_path / "first"))
    assert first.returncode == EXIT_OK, first.stderr
    plan = tmp_path / "first" / "controller.jsonl"
    again = _run("learn", *auto, "--plan-from", str(plan), "--out", str(tmp_path / "again"))
    assert again.returncode == EXIT_OK, again.stderr
    assert (tmp_path / "again" / "final.json").read_bytes() == (tmp_path / "first" / "final.json").read_bytes()
    sizes = [[json.loads(line)["batch_size"] for line in (tmp_path / run / "controller.jsonl").read_bytes().splitlines()]
             for run in ("first", "again")]
    assert sizes[0] == sizes[1] and sizes[0]
    recorded = json.loads((tmp_path / "again" / "config.json").read_bytes())["train"]["plan_from"]
    assert recorded == str(plan)  # a resume of the repeated run follows the same plan
    short = tmp_path / "short.jsonl"
    short.write_bytes(plan.read_bytes().splitlines(keepends=True)[0])
    cut = _run("learn", *auto, "--plan-from", str(short), "--out", str(tmp_path / "cut"))
    assert cut.returncode == EXIT_USAGE and cut.stderr.count("\n") == 1 and "holds 1 batch decisions" in cut.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"batch_size": "many"}\n')
    refused = _run("learn", *auto, "--plan-from", str(bad), "--out", str(tmp_path / "bad"))
    assert refused.returncode == EXIT_USAGE and f"{bad}:1: not a batch decision" in refused.stderr
