"""``combee learn --local`` and ``combee eval --local`` end to end, in real processes, on the
default local model (Qwen2.5-Coder-0.5B-Instruct on the ``local`` extra's llama.cpp server): one
Combee step over a tiny train slice, learned once for the module, then what a real model's run
must show (the server's log and command kept, the structured-output form probed, every role's calls
counted and every failure accounted with its raw reply, generator replies that parse, a playbook
written and scored by ``eval``), and a run in which every call fails exiting non-zero.

Needs the ``local`` extra (``pip install -e '.[local]'``); skipped, saying so, without.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from combee_fast.ace.roles import ROLES
from tests.local_models import DEFAULT, LOCAL_FLAGS, LOCAL_MODEL_MARKS

pytestmark = LOCAL_MODEL_MARKS

CONTENT_FAILURES = ("placeholder", "no_answer")
"""Kinds of a reply that parsed but carries no answer (see ``roles.base.no_answer``)."""

TRAIN, VAL = "train[0:3]", "val[0:2]"
"""The slices learned on and scored: one step of three items, two validation examples."""


def _combee(state: Path, *args: str, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    """``combee ARGS`` in a process of its own, its state in ``state`` and no OpenAI or MLflow
    settings (a module fixture cannot take the suite's per-test isolation)."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "MLFLOW_TRACKING_URI")}
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**env, "COMBEE_STATE_DIR": str(state)})


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One Combee step on the default local model (two slots), and its run folder."""
    folder = tmp_path_factory.mktemp("local-learn")
    out = folder / "run"
    done = _combee(folder / "state", "learn", "--local", *LOCAL_FLAGS, "--local-slots", "2", "--method", "combee",
                   "--train-split", TRAIN, "--val-split", VAL, "--batch-size", "3", "--max-rounds", "0",
                   "--out", str(out), "--quiet")
    return done, out


def _failures(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]


def test_the_run_keeps_the_local_servers_log_and_command_and_probes_its_form(learned) -> None:
    done, out = learned
    assert (out / "server.log").exists(), done.stderr
    server = json.loads((out / "local_server.json").read_text())
    assert server["model"].endswith(DEFAULT.file), server
    capabilities = json.loads((out / "capabilities.json").read_text())
    assert capabilities[0]["probed"] and capabilities[0]["form"] in ("json_schema", "json_object_schema")
    served = json.loads((out / "ledger.jsonl").read_text().splitlines()[0])["models"]
    assert served["generator"].startswith(f"{DEFAULT.alias} @ "), served


def test_the_summary_holds_the_local_servers_own_count_of_its_work(learned) -> None:
    done, out = learned
    summary = json.loads((out / "summary.json").read_text())
    work = summary.get("server_work")
    assert work is not None, ("no server_work in summary.json", done.stderr[-600:])
    generated = sum(sum(json.loads(line)["completion_tokens"].values())
                    for line in (out / "ledger.jsonl").read_text().splitlines())
    # the steps' calls and the final validation's: at least every token the ledger counts
    assert work["generated_tokens"] >= generated > 0, (work, generated)
    assert work["prompt_s"] > 0 and work["generate_s"] > 0 and 0 < work["prefill_share"] < 1, work
    assert work["prefill_share"] == work["prompt_s"] / (work["prompt_s"] + work["generate_s"])
    command = json.loads((out / "local_server.json").read_text())["command"]
    assert work["servers"] == [f"http://127.0.0.1:{command[command.index('--port') + 1]}"], work  # the one counted


def test_every_role_is_called_and_every_failure_is_accounted_with_its_raw_reply(learned) -> None:
    done, out = learned
    calls = json.loads((out / "calls.json").read_text())
    # every ACE role is accounted, in calls.json and per phase (the reducer merges two curators'
    # edits: three items make one curator group, so it is not called); at --max-rounds 0, one
    # generator call per train item and per validation example
    assert {role.name for role in ROLES} <= calls.keys(), calls
    accounting = json.loads((out / "summary.json").read_text())["accounting"]
    assert accounting["train"]["calls"]["generator"] == 3 and accounting["validation"]["calls"]["generator"] == 2
    assert accounting["train"]["calls"]["reflector"] >= 1 and accounting["train"]["calls"]["curator"] >= 1, accounting
    for role in ROLES:
        assert calls[role.name] == sum(phase["calls"].get(role.name, 0) for phase in accounting.values()), role
    failures = _failures(out)
    for failure in failures:
        assert failure["kind"] and "raw" in failure and failure["role"] in calls
    generator = [failure for failure in failures if failure["role"] == "generator"]
    # A reply that parsed but copies the prompt's slot (``<response>``) is the model's failure, not
    # the parser's: it is recorded as such (with its raw text) and kept out of the parse rate.
    unparsed = [failure for failure in generator if failure["kind"] not in CONTENT_FAILURES]
    parsed = 1 - len(unparsed) / calls["generator"]
    print(f"\nlocal model: {calls['generator'] - len(unparsed)} of {calls['generator']} generator replies parsed "
          f"({100 * parsed:.1f}%), {len(generator) - len(unparsed)} of them without an answer; calls {calls}; "
          f"failures by kind {sorted({f['kind'] for f in failures})}; exit {done.returncode}")
    assert parsed >= 0.95
    assert all(failure["raw"].strip() for failure in generator if failure["kind"] in CONTENT_FAILURES)


def test_the_run_learns_distinct_lessons_and_writes_its_playbook_and_report(learned) -> None:
    """The 0.5B model learns: its curator adds lessons to the empty playbook (it answered "The
    playbook is empty, so no lessons are new." before its prompt said otherwise), no two alike (it
    repeats an ADD within one reply; the copies are refused as duplicates). The summary, ledger and
    playbook agree, and the report is written."""
    done, out = learned
    assert done.returncode == 0, done.stderr
    final = json.loads((out / "final.json").read_text())
    contents = [bullet["content"] for bullet in final["bullets"]]
    assert contents and len(set(contents)) == len(contents), contents
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    step = json.loads((out / "ledger.jsonl").read_text().splitlines()[-1])
    assert summary["bullets"] == step["size"] == len(contents), (summary, step)
    assert set(step["rejections"]) <= {"duplicate"}, step["rejections"]
    assert all((out / name).is_file() for name in ("best.json", "report.md", "prompt.txt"))


def test_eval_scores_the_learned_playbook_on_the_local_model(learned, tmp_path: Path) -> None:
    _, out = learned
    evaluated = _combee(tmp_path / "state", "eval", "--local", *LOCAL_FLAGS, "--split", "test[0:2]", "--playbook",
                        str(out / "final.json"))  # as docs/real-models.md: rows the run did not select on
    assert evaluated.returncode == 0, evaluated.stderr
    report = json.loads(evaluated.stdout.strip().splitlines()[-1])
    assert report["examples"] == 2 and report["seen_rows"] == {}  # a held-out score


def test_a_local_run_in_which_every_call_fails_exits_non_zero(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _combee(tmp_path / "state", "learn", "--local", *LOCAL_FLAGS, "--train-split", "train[0:2]", "--val-split", "val[0:1]",
                   "--batch-size", "2", "--sampling", "default.max_completion_tokens=1", "--out", str(out), "--quiet")
    assert done.returncode != 0
    failures = _failures(out)
    assert failures and all(failure["kind"] == "truncated" for failure in failures)
