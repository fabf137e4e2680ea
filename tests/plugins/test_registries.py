"""Learners, executor backends and tasks by name, entry point and path (:mod:`combee_fast.plugins`),
and a learner kind completed with its defaults (:mod:`combee_fast.kinds`): real ``combee``
processes, a plugin installed with pip (``conftest.py``), a simulated server on loopback."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from combee_fast.config import SessionConfig, TrainConfig
from combee_fast.errors import ConfigError
from combee_fast.kinds import OPTIONAL_METHODS, REQUIRED, Kind
from combee_fast.learners import LEARNERS, resolve
from combee_fast.protocols.learning import LearnerKind
from combee_fast.run.state import TrainState
from combee_fast.run.stops import EpochsDone
from tests.plugins.combee_notes.kind import NOTES
from tests.plugins.combee_notes.notes import Notes
from tests.plugins.projects import learner_project, pip_install

ROOT = Path(__file__).resolve().parents[2]
NOTES_PATH = "tests.plugins.combee_notes.kind:NOTES"
FAST = ("--train-split", "train[0:20]", "--val-split", "val[0:10]", "--batch-size", "10", "--quiet")


def _combee(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd)


def _one_line(done: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    for part in parts:
        assert part in done.stderr, done.stderr


@pytest.mark.parametrize(("flags", "said"), [
    (("--learner", "nope"), ("unknown learner 'nope'; choose one of: ace, gepa, textgrad", "package.module:object")),
    (("--learner", "no_such_package.kind:KIND"),
     ("learner 'no_such_package.kind:KIND': cannot import no_such_package.kind: ModuleNotFoundError",)),
    (("--learner", "tests.plugins.combee_notes.kind:NOPE"),
     ("learner 'tests.plugins.combee_notes.kind:NOPE': tests.plugins.combee_notes.kind has no 'NOPE'",)),
    (("--learner", "tests.plugins.combee_notes.notes:Notes"),
     ("learner 'tests.plugins.combee_notes.notes:Notes': Notes lacks the learner member(s) name, roles,",)),
    (("--task", "nope"), ("unknown task 'nope'; choose one of: formula, finer, jsonl, traces, terminal",)),
    (("--task", "tests.plugins.combee_notes.task:glossary", "--task-option", "colour=red"),
     ("scorer 'exact': bad options ['colour']",)),  # the plugin's task hands its options to its scorer
    (("--task", "terminal", "--executor", "nope"),
     ("unknown executor.backend 'nope'; choose one of: local, process, ray",)),
    (("--task", "terminal", "--executor", "tests.plugins.combee_notes:QueueExecutor"),
     ("executor.backend 'tests.plugins.combee_notes:QueueExecutor': tests.plugins.combee_notes has no",)),
])
def test_a_bad_name_or_path_is_one_line_naming_it(flags: tuple[str, ...], said: tuple[str, ...], tmp_path) -> None:
    _one_line(_combee("learn", *flags, *FAST, "--out", str(tmp_path / "run")), *said)
    assert not (tmp_path / "run").exists()


def test_an_installed_plugin_is_found_by_its_entry_point_names(plugin_env, tmp_path) -> None:
    run = tmp_path / "run"
    done = _combee("learn", "--task", "glossary", "--learner", "notes", "--val-split", "val", "--batch-size", "10",
                   "--quiet", "--out", str(run), env=plugin_env)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[0])
    assert summary["learner"] == "notes" and summary["method"] == "combee-notes" and summary["notes"] > 0
    config = json.loads((run / "config.json").read_text())
    assert (config["learner"], config["task"]["name"]) == ("notes", "glossary")  # what --resume finds again
    assert Notes.load(run / "final.json") is not None
    listed = _combee("learn", "--learner", "nope", *FAST, env=plugin_env)
    _one_line(listed, "choose one of: ace, gepa, textgrad, notes (or package.module:object)")


BROKEN = ("learner 'broken' (entry point 'combee_broken:KIND' of group combee_fast.learners): cannot load: "
          "RuntimeError: this plugin is broken")


def test_a_broken_plugin_is_one_line_naming_it_and_spoils_no_run_of_another_learner(broken_env, tmp_path) -> None:
    _one_line(_combee("learn", "--learner", "broken", *FAST, "--out", str(tmp_path / "a"), env=broken_env), BROKEN)
    for learner in ("ace", "notes"):
        fine = _combee("learn", "--learner", learner, *FAST, "--out", str(tmp_path / learner), env=broken_env)
        assert fine.returncode == 0, fine.stderr
    _one_line(_combee("sim-server", "--port", "0", env=broken_env), BROKEN)  # it answers every learner's roles


def test_a_path_learners_files_are_found_again_by_the_run_config(tmp_path) -> None:
    """``eval`` and ``show`` of a plugin's ``final.json`` ask the learner its run's config.json names."""
    run = tmp_path / "run"
    assert _combee("learn", "--learner", NOTES_PATH, *FAST, "--out", str(run)).returncode == 0
    shown = _combee("show", str(run / "final.json"))
    assert shown.returncode == 0 and shown.stdout.startswith("- ")
    scored = _combee("eval", "--playbook", str(run / "final.json"), "--split", "test[0:10]", "--out", str(tmp_path / "e"))
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)["learner"] == "notes"
    assert json.loads((tmp_path / "e" / "config.json").read_text())["learner"] == NOTES_PATH


def test_learner_kind_has_at_most_ten_required_members() -> None:
    declared = set(LearnerKind.__annotations__) | {name for name, value in vars(LearnerKind).items()
                                                   if inspect.isfunction(value) and not name.startswith("__")}
    assert declared == set(REQUIRED) and len(REQUIRED) <= 10


def test_a_kind_is_completed_with_the_defaults() -> None:
    kind = Kind(NOTES, "here")
    config = SessionConfig(train=TrainConfig(batch_size=7, epochs=3))
    assert kind.key == "here" and kind.name == "notes"
    assert kind.methods == {"sequential": "notes", "naive": "naive-notes", "combee": "combee-notes"}
    assert kind.rollout_role == "notes_answer" and kind.learning_roles == ("notes_critic", "notes_editor")
    assert (kind.citable, kind.size_unit, kind.summary(Notes(("a: b",)))) == (False, "notes", {"notes": 1})
    assert kind.batch_size("combee", config) == 7 and kind.live_plan("combee", config, None) is None
    [rule] = kind.stop_rules(config)
    state = TrainState.fresh(Notes())
    assert isinstance(rule, EpochsDone) and rule.check(state) is None
    state.epoch = 3
    assert rule.check(state) is not None
    notes = Notes(("x: one", "y: two"), version=4)
    assert kind.decode_artifact(kind.encode_artifact(notes)) == notes and kind.deployable(notes) is notes
    assert kind.lessons(notes) == ["- x: one", "- y: two"]
    [(name, data)] = kind.version_files(notes)
    assert name == "versions/v00004.json"
    with pytest.raises(ConfigError, match="learner 'here' cannot learn online"):
        kind.online_learner(None)  # type: ignore[arg-type]


def test_a_kind_missing_members_or_with_bad_roles_is_refused() -> None:
    class Half:
        name = "half"
        roles = NOTES.roles

    with pytest.raises(ConfigError, match=r"learner 'half': Half lacks the learner member\(s\) artifact_type, initial, "
                                          r"build_method, evaluate, load"):
        Kind(Half(), "half")

    class NoServing(type(NOTES)):  # type: ignore[misc]
        roles = NOTES.roles[1:]

    with pytest.raises(ConfigError, match="learner 'ns': no role in pool 'serve'"):
        Kind(NoServing(), "ns")


def test_the_builtin_kinds_keep_only_what_differs_from_the_defaults() -> None:
    for name in LEARNERS.builtin:
        kind = LEARNERS.load(name)
        raw, defaults = kind.raw, Kind(_Minimal(kind.raw), name)
        for member in ("methods", "citable", "rollout_role", "learning_roles", "size_unit", "responders"):
            if hasattr(raw, member):
                assert getattr(kind, member) != getattr(defaults, member), f"{name}.{member} equals its default"
        for member in OPTIONAL_METHODS:
            if member in vars(type(raw)):
                assert vars(type(raw))[member] is not getattr(Kind, member)


class _Minimal:
    """Only the required members of ``raw``."""

    def __init__(self, raw: object) -> None:
        for member in REQUIRED:
            setattr(self, member, getattr(raw, member))


def test_a_method_alias_of_a_plugin_learner_names_it() -> None:
    LEARNERS["here"] = NOTES
    try:
        choice = resolve(None, "naive-notes")
        assert (choice.kind.key, choice.method) == ("here", "naive")
        with pytest.raises(ConfigError, match="method 'naive-notes' is learner 'here''s; the run names learner 'ace'"):
            resolve("ace", "naive-notes")
    finally:
        del LEARNERS["here"]
    assert "here" not in LEARNERS


def test_sim_server_answers_the_roles_of_a_learner_by_path_and_of_an_installed_one(plugin_env, tmp_path) -> None:
    for name, extra, env in (("path", ("--learner", NOTES_PATH), None), ("installed", (), plugin_env)):
        server = subprocess.Popen([sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0",
                                   "--time-scale", "0.0001", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, cwd=ROOT, env=env)
        try:
            first = server.stdout.readline().split()  # type: ignore[union-attr]
            assert first[:2] == ["listening", "on"], server.stderr.read() if server.poll() is not None else first  # type: ignore[union-attr]
            learner = NOTES_PATH if env is None else "notes"
            done = _combee("learn", "--learner", learner, *FAST, "--endpoint", first[2], "--model", "sim",
                           "--out", str(tmp_path / name), env=env)
            assert done.returncode == 0, done.stderr
            summary = json.loads(done.stdout.splitlines()[0])
            assert summary["notes"] > 0 and summary["accounting"]["train"]["errors"] == {}, summary
            assert summary["final_val_answered"] == 10
        finally:
            server.terminate()
            server.wait(timeout=30)


def test_two_installed_plugins_offering_one_name_are_refused_naming_both(plugin_env, tmp_path) -> None:
    """Issue 53: two installed packages offering learner ``twin``: one was taken silently."""
    twin = "from combee_notes.kind import NotesKind\n\n\nclass Twin(NotesKind):\n    name = 'twin'\n\n\nKIND = Twin()\n"
    sites = [pip_install(learner_project(tmp_path, f"combee-twin-{side}", learner="twin", attribute="KIND", module=twin),
                         tmp_path / f"site-{side}") for side in ("a", "b")]
    env = {**plugin_env, "PYTHONPATH": ":".join([plugin_env["PYTHONPATH"], *map(str, sites)])}
    _one_line(_combee("learn", "--learner", "twin", *FAST, "--out", str(tmp_path / "run"), env=env, cwd=tmp_path),
              "learner 'twin' is offered by 2 installed packages: combee-twin-a (combee_twin_a:KIND), "
              "combee-twin-b (combee_twin_b:KIND); uninstall all but one, or give the one you mean by its path")
    assert not (tmp_path / "run").exists()
    ran = _combee("learn", "--learner", "notes", *FAST, "--time-scale", "0.0001", "--out", str(tmp_path / "notes"),
                  env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr  # a name no one else offers still runs
