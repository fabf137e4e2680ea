"""Start-up of the real `combee` process: nothing is made or replaced until the run has started,
and every bad path, flag or file is one line and exit 2 (no traceback)."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import _combee

SMALL = ("--train-split", "train[0:10]", "--val-split", "val[0:5]", "--batch-size", "10",
         "--sim-preset", "flat", "--time-scale", "0.0001", "--quiet")


def _one_line_exit_2(done) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr


def test_overwrite_with_a_typo_keeps_the_previous_run(tmp_path) -> None:
    out = tmp_path / "run"
    assert _combee("learn", *SMALL, "--out", str(out)).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    done = _combee("learn", *SMALL, "--sim-preset", "h200-7b", "--out", str(out), "--overwrite")
    _one_line_exit_2(done)
    assert "h200-7b" in done.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # no staging folder left beside it


@pytest.mark.parametrize("bad", [
    ("--task", "no-such-task"),
    ("--sim-preset", "h200-7b"),
    ("--task", "jsonl", "--data", "DATA", "--train-split", "all", "--val-split", "all"),
    ("--endpoint", "http://127.0.0.1:9/v1", "--model", "m"),
])
def test_a_run_that_fails_at_start_up_leaves_no_directory(tmp_path, bad: tuple[str, ...]) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text('{"input": "q1", "target": "a"}\n{"input": "q2", "target": \n')
    out = tmp_path / "new" / "deeper" / "run"
    done = _combee("learn", *SMALL, *(str(data) if arg == "DATA" else arg for arg in bad), "--out", str(out))
    _one_line_exit_2(done)
    assert [p.name for p in tmp_path.iterdir()] == ["data.jsonl"]


def test_overwrite_replaces_the_run_once_the_new_one_started(tmp_path) -> None:
    out = tmp_path / "run"
    assert _combee("learn", *SMALL, "--out", str(out)).returncode == 0
    (out / "playbooks" / "v99999.json").write_text("{}")  # a version the new run will not write
    assert _combee("learn", *SMALL, "--seed", "7", "--out", str(out), "--overwrite").returncode == 0
    assert json.loads((out / "config.json").read_text())["seed"] == 7
    assert not (out / "playbooks" / "v99999.json").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_every_file_of_a_run_has_mode_0644(tmp_path) -> None:
    out = tmp_path / "run"
    assert _combee("learn", *SMALL, "--out", str(out)).returncode == 0
    modes = {str(p.relative_to(out)): oct(p.stat().st_mode & 0o777) for p in out.rglob("*") if p.is_file()}
    assert {"summary.json", "final.json", "ledger.jsonl", "playbooks/v00001.json"} <= modes.keys()
    assert set(modes.values()) == {"0o644"}, modes


@pytest.mark.parametrize("args, says", [
    (("--out", "FILE"), "exists and is not a folder"),
    (("--out", "FILE/run"), "is not a folder"),
    (("--out", "/proc/combee-run"), "cannot write in /proc"),
    (("--cache", "DIR", "--cache-mode", "record"), "the cache must be a file, this is a folder"),
    (("--cache", "DIR", "--cache-mode", "replay"), "the cache must be a file, this is a folder"),
    (("--timeout", "inf"), "transport.timeout_s must be > 0 and finite, got inf"),
    (("--timeout", "nan"), "transport.timeout_s must be > 0 and finite, got nan"),
    (("--model", "m"), "names model 'm' but no URL: give --endpoint too"),
    (("--role-model", "reflector=m"), "names model 'm' but no URL: give --role-endpoint reflector=URL too"),
    (("--max-rounds", "-1"), "map.max_rounds must be >= 0, got -1"),
    (("--eval-every", "-1"), "train.eval_every must be >= 0, got -1"),
    (("--train-split", "train[0:0]"), "split 'train[0:0]' is empty"),
    (("--task", "jsonl", "--data", "EMPTY", "--train-split", "all", "--val-split", "all"), "is empty"),
])
def test_bad_paths_flags_and_files_are_one_line_and_exit_2(tmp_path, args: tuple[str, ...], says: str) -> None:
    (tmp_path / "file").write_text("")
    (tmp_path / "dir").mkdir()
    (tmp_path / "empty.jsonl").write_text("")
    names = {"FILE": str(tmp_path / "file"), "FILE/run": str(tmp_path / "file" / "run"), "DIR": str(tmp_path / "dir"),
             "EMPTY": str(tmp_path / "empty.jsonl")}
    out = () if "--out" in args else ("--out", str(tmp_path / "run"))
    done = _combee("learn", *SMALL, *(names.get(arg, arg) for arg in args), *out)
    _one_line_exit_2(done)
    assert says in done.stderr
    assert not (tmp_path / "run").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["dir", "empty.jsonl", "file"]


def test_model_flag_keeps_the_url_of_the_config_file(tmp_path) -> None:
    config = tmp_path / "run.toml"
    config.write_text('[endpoints.default]\nurl = "http://127.0.0.1:9/v1"\nmodel = "old"\n')
    done = _combee("learn", "--config", str(config), "--model", "new", "--out", str(tmp_path / "r"))
    _one_line_exit_2(done)
    assert "127.0.0.1:9" in done.stderr  # it tried the configured server, not the simulator


def test_a_corrupt_splits_file_beside_the_playbook_is_one_line(tmp_path) -> None:
    out = tmp_path / "run"
    assert _combee("learn", *SMALL, "--out", str(out)).returncode == 0
    (out / "splits.json").write_text('[{"task": "formula", "split": ')
    done = _combee("eval", "--split", "val[0:5]", "--playbook", str(out / "final.json"),
                   "--sim-preset", "flat", "--time-scale", "0.0001")
    _one_line_exit_2(done)
    assert f"{out / 'splits.json'} (the split hashes of {out / 'final.json'}) is unreadable" in done.stderr


def test_sim_server_on_a_port_in_use_is_one_line(tmp_path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _combee("sim-server", "--port", str(port))
    _one_line_exit_2(done)
    assert f"sim-server: cannot listen on 127.0.0.1:{port}: " in done.stderr and "address already in use" in done.stderr
