"""The run directory: staged until the run starts, replacing a previous run only then, one file mode."""

from __future__ import annotations

import os
import stat

import pytest

from combee_fast.config import SessionConfig
from combee_fast.errors import ConfigError
from combee_fast.ace.playbook import Playbook
from combee_fast.record.rundir import RunDir, check_run_target

FIRST, SECOND = SessionConfig(seed=1), SessionConfig(seed=2)


def _version(playbook: Playbook) -> list[tuple[str, bytes]]:
    return [(f"playbooks/v{playbook.version:05d}.json", playbook.to_bytes())]


def _config_of(root) -> SessionConfig:
    from combee_fast.config import load_config

    return load_config(root / "config.json")


def _tree(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_run_that_never_starts_leaves_nothing_not_even_the_parents_it_made(tmp_path) -> None:
    run_dir = RunDir(tmp_path / "a" / "b" / "run")
    run_dir.write_config(FIRST)
    run_dir.close()
    assert _tree(tmp_path) == []


def test_overwrite_replaces_the_previous_run_only_once_the_new_one_proved_itself(tmp_path) -> None:
    root = tmp_path / "run"
    first = RunDir(root)
    first.start()
    first.write_config(FIRST)
    first.save_version(_version(Playbook.empty()))
    first.close()
    (root / "notes.txt").write_text("mine")  # not a run file: kept
    second = RunDir(root, overwrite=True)
    second.write_config(SECOND)
    second.start()
    second.append_decision({"step": 0})
    assert second.replacing and _config_of(root).seed == 1 and (root / "playbooks" / "v00000.json").exists()
    with pytest.raises(ConfigError, match="in use by another combee process"):
        RunDir.reopen(root)  # the previous run is held while it is being replaced
    second.replace_previous()
    second.close()
    assert _config_of(root).seed == 2
    assert not (root / "playbooks" / "v00000.json").exists()
    assert (root / "controller.jsonl").read_text() == '{"step":0}\n'
    assert (root / "notes.txt").read_text() == "mine"
    assert _tree(tmp_path) == ["run", *(f"run/{name}" for name in sorted(
        [".lock", "config.json", "controller.jsonl", "deltas.jsonl", "errors.jsonl", "ledger.jsonl", "notes.txt",
         "predictions.jsonl", "replies.jsonl"]))]


def _previous_run(root) -> None:
    first = RunDir(root)
    first.write_config(FIRST)
    first.start()
    first.close()


def test_a_new_run_that_never_replaced_the_previous_one_is_kept_beside_it(tmp_path) -> None:
    root = tmp_path / "run"
    _previous_run(root)
    second = RunDir(root, overwrite=True)
    second.write_config(SECOND)
    second.start()
    second.close()
    aside = second.location
    assert aside.parent == tmp_path and aside.name.startswith("run.unswapped-")
    assert _config_of(root).seed == 1 and _config_of(aside).seed == 2
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_overwrite_that_fails_to_start_keeps_the_previous_run(tmp_path) -> None:
    root = tmp_path / "run"
    _previous_run(root)
    second = RunDir(root, overwrite=True)
    second.close()
    assert _config_of(root).seed == 1 and _tree(tmp_path)[0] == "run"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_version_and_artifact_files_go_only_where_the_run_keeps_them(tmp_path) -> None:
    run_dir = RunDir(tmp_path / "run")
    for name in ("../escape.json", "prompts/notes.json", "a/b/v00001.json", "Prompts/v00001.json", "v00001.json"):
        with pytest.raises(ValueError, match="not a version file"):
            run_dir.save_version([(name, b"{}")])
    with pytest.raises(ValueError, match="not an artifact file"):
        run_dir.save_artifact("config.json", Playbook.empty())
    run_dir.close()


def test_every_run_file_gets_one_mode_whatever_the_umask(tmp_path) -> None:
    old = os.umask(0o077)
    try:
        run_dir = RunDir(tmp_path / "run")
        run_dir.write_config(FIRST)
        run_dir.save_version(_version(Playbook.empty()))
        run_dir.save_artifact("final.json", Playbook.empty())
        run_dir.start()
        run_dir.append_decision({})
        run_dir.close()
    finally:
        os.umask(old)
    modes = {str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "run").rglob("*")}
    modes["run"] = stat.S_IMODE((tmp_path / "run").stat().st_mode)
    assert {name: mode for name, mode in modes.items() if (tmp_path / name).is_file()} == {
        name: 0o644 for name in ("run/.lock", "run/config.json", "run/controller.jsonl", "run/deltas.jsonl",
                                 "run/errors.jsonl", "run/final.json", "run/ledger.jsonl", "run/playbooks/v00000.json",
                                 "run/predictions.jsonl", "run/replies.jsonl")}
    assert modes["run"] == modes["run/playbooks"] == 0o755


def test_bad_targets_are_refused_in_one_line_before_anything_is_made(tmp_path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(ConfigError, match="exists and is not a folder"):
        check_run_target(a_file)
    with pytest.raises(ConfigError, match="is not a folder"):
        check_run_target(a_file / "run")
    with pytest.raises(ConfigError, match=r"run directory /proc/combee-run: cannot write in /proc \("):
        check_run_target("/proc/combee-run")  # not writable even by root
    if os.geteuid() != 0:  # root writes anywhere else
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        with pytest.raises(ConfigError, match="Permission denied"):
            check_run_target(locked / "run")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", *(["locked"] if os.geteuid() != 0 else [])]


def test_any_learners_version_folder_is_known_by_its_shape_and_replaced_with_its_run(tmp_path) -> None:
    root = tmp_path / "run"
    first = RunDir(root)
    first.save_version([("prompts/v00001.json", b"{}"), ("candidates/c00000.json", b"{}")])  # TextGrad's, GEPA's
    first.start()
    first.close()
    (root / "data").mkdir()
    (root / "data" / "mine.json").write_text("{}")  # not a version file: kept
    only = tmp_path / "only"
    (only / "prompts").mkdir(parents=True)
    (only / "prompts" / "v00003.json").write_text("{}")
    with pytest.raises(ConfigError):
        check_run_target(only)  # a folder holding nothing but a learner's versions holds a run
    check_run_target(root / "data")
    second = RunDir(root, overwrite=True)
    second.start()
    second.replace_previous()
    second.close()
    assert not (root / "prompts").exists() and not (root / "candidates").exists()
    assert (root / "data" / "mine.json").exists()


def test_a_symlinked_out_is_refused_and_leaves_the_place_as_it_was(tmp_path) -> None:
    """--out naming a symbolic link moved the link aside, failed, and left a journal no later
    command could finish ("Cannot call rmtree on a symbolic link", issue 53): now one line, exit 2,
    nothing made, for a new run and a resume alike."""
    import subprocess
    import sys

    (folder := tmp_path / "real").mkdir()
    (link := tmp_path / "link").symlink_to(folder)
    before = sorted(p.name for p in tmp_path.iterdir())
    for argv in (["--train-split", "train[0:4]", "--out", str(link), "--quiet"], ["--resume", str(link)]):
        done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", *argv],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2
        assert done.stderr.strip().splitlines() == [
            f"combee learn: error: run directory {link} is a symbolic link (to {folder}); give the folder itself as --out"]
    assert sorted(p.name for p in tmp_path.iterdir()) == before and not any(folder.iterdir())
