"""Issue 52, finding 1: a plug-in learner against a simulated endpoint that does not play its
roles is refused at start-up in one line naming the role and what to do (it used to be answered
with its own role name, score 0% and exit 0). The learner is installed from outside the tree
(``tests/plugins``, as its other tests install it); the endpoint is the in-process one or a real
``combee sim-server`` on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from combee_fast.errors import EXIT_USAGE
from tests.plugins.projects import learner_project, pip_install
from tests.sim_server_process import sim_server_process

COMBEE = Path(sys.executable).with_name("combee")
MUTE = '''from combee_notes.kind import NotesKind


class MuteKind(NotesKind):
    """The notes learner without simulated-endpoint responders: no simulated world plays its roles."""

    name = "mute"
    responders = {}


MUTE = MuteKind()
'''
LEARN = ("--task", "formula", "--train-split", "train[0:4]", "--val-split", "val[0:2]", "--batch-size", "4",
         "--time-scale", "0.0001", "--quiet")


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == EXIT_USAGE and len(lines) == 1, (done.returncode, done.stderr)
    return lines[0]


def test_a_learner_the_in_process_simulated_endpoint_does_not_play_is_refused_at_start(
        plugin_sites: tuple[Path, Path], tmp_path: Path) -> None:
    (tmp_path / "combee_mute.py").write_text(MUTE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(plugin_sites[0])])}
    done = subprocess.run([str(COMBEE), "learn", "--learner", "combee_mute:MUTE", *LEARN, "--out",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    line = _one_line(done)
    assert "the in-process simulated endpoint does not play role 'answer' (requests named 'notes_answer') of " \
           "learner 'mute'" in line, line
    assert "responders" in line and "--role-endpoint answer=URL" in line
    assert not (tmp_path / "run").exists()  # refused before anything was made


@pytest.fixture()
def bare_server() -> Iterator[str]:
    """A ``combee sim-server`` that has no plug-in installed (it plays the built-in learners only)."""
    with sim_server_process("--time-scale", "0.0001") as url:
        yield url


def test_a_sim_server_that_does_not_know_an_installed_learner_refuses_it_at_start(
        plugin_env: dict[str, str], bare_server: str, tmp_path: Path) -> None:
    done = subprocess.run([str(COMBEE), "learn", "--learner", "notes", *LEARN, "--endpoint", bare_server, "--model",
                           "sim", "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=300,
                          env=plugin_env, cwd=tmp_path)
    line = _one_line(done)
    assert "a combee sim-server, does not play role 'answer' (requests named 'notes_answer') of learner 'notes'" \
        in line, line
    assert "combee sim-server --learner notes" in line


GENERIC = '''from combee_notes.kind import NotesKind

from combee_fast.sim.responders import generic_reply


class SmokeKind(NotesKind):
    """The notes learner answered by the generic simulated responder: a smoke test, offline."""

    name = "smoke"
    responders = {role.key: generic_reply for role in NotesKind.roles}


SMOKE = SmokeKind()
'''


def test_a_plugin_that_opts_into_the_generic_responder_runs_offline_on_answers_that_parse(
        plugin_sites: tuple[Path, Path], tmp_path: Path) -> None:
    (tmp_path / "combee_smoke.py").write_text(GENERIC)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(plugin_sites[0])])}
    out = tmp_path / "run"
    done = subprocess.run([str(COMBEE), "learn", "--learner", "combee_smoke:SMOKE", *LEARN, "--out", str(out)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    replies = [json.loads(line) for line in (out / "replies.jsonl").read_text().splitlines()]
    assert replies and not any(r["failed"] for r in replies)  # every reply parsed: none a placeholder
    assert all(r["reply"] for r in replies) and any("a simulated reply" in r["reply"] for r in replies)


HIJACK = '''from combee_notes.kind import NotesKind


def wrong(world, request):
    return "always wrong"


class HijackKind(NotesKind):
    """The notes learner, also declaring a responder for the built-in learners' generator role."""

    name = "hijack"
    responders = {**NotesKind.responders, "generator": wrong}


HIJACK = HijackKind()
'''


def test_an_installed_plugin_answering_a_built_in_role_is_refused_by_the_sim_server(
        plugin_sites: tuple[Path, Path], tmp_path: Path) -> None:
    """Issue 53: an installed learner declaring a responder for ``generator`` silently took the
    built-in learners' answers over in ``combee sim-server`` (75 % to 0 %, exit 0)."""
    site = pip_install(learner_project(tmp_path, "combee-hijack", learner="hijack", attribute="HIJACK", module=HIJACK),
                       tmp_path / "hijack-site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_sites[0]), str(site)])}
    done = subprocess.run([str(COMBEE), "sim-server", "--port", "0"], capture_output=True, text=True, timeout=120,
                          env=env, cwd=tmp_path)
    assert _one_line(done).endswith("learner 'hijack' declares a responder for role 'generator', already answered by "
                                    "the built-in learners: give its role a name of its own"), done.stderr
