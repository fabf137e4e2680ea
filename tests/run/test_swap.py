"""The journaled replacement of a run: a real process killed (SIGKILL) before each file-system
operation of the swap, then the next command on the directory, which finishes the swap (or rolls
it back) and says so; the directory always holds one whole run, the user's files kept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from combee_fast.config import SessionConfig, load_config
from combee_fast.errors import ConfigError
from combee_fast.record.rundir import RunDir, check_run_target

# The child replaces the run in ROOT; it SIGKILLs itself just before its KILL_AT-th file-system
# call inside replace_previous (counted by a profile hook on the os functions it makes).
_CHILD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from combee_fast.config import SessionConfig
    from combee_fast.record.rundir import RunDir

    root, kill_at = Path(sys.argv[1]), int(sys.argv[2])
    CALLS = {"rename", "replace", "unlink", "rmdir", "fsync", "open", "mkdir", "write", "close", "scandir",
             "fchmod", "mkstemp"}
    seen = 0

    def killer(frame, event, arg):
        global seen
        if event == "c_call" and getattr(arg, "__name__", "") in CALLS:
            seen += 1
            if seen == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    run = RunDir(root, overwrite=True)
    run.write_config(SessionConfig(seed=2))
    run.start()
    sys.setprofile(killer)
    run.replace_previous()
    sys.setprofile(None)
    print(seen, flush=True)
    run.close()
""")


def _previous_run(root: Path) -> None:
    first = RunDir(root)
    first.write_config(SessionConfig(seed=1))
    first.append_decision({"run": 1})
    first.start()
    first.close()
    (root / "notes.txt").write_text("mine")


def _child(root: Path, kill_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _CHILD, str(root), str(kill_at)], capture_output=True, text=True,
                          timeout=60)


def _operations(tmp_path: Path) -> int:
    """File-system calls of one whole replacement (the child not killed)."""
    root = tmp_path / "count" / "run"
    root.parent.mkdir()
    _previous_run(root)
    done = _child(root, 10**9)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.mark.slow
def test_a_kill_at_any_point_of_the_swap_is_recovered_by_the_next_command(tmp_path: Path, capsys) -> None:
    total = _operations(tmp_path)
    assert total >= 6
    outcomes = set()
    for kill_at in range(1, total + 1):
        root = tmp_path / f"k{kill_at}" / "run"
        root.parent.mkdir()
        _previous_run(root)
        killed = _child(root, kill_at)
        assert killed.returncode == -signal.SIGKILL, (kill_at, killed.stderr)
        capsys.readouterr()
        check_run_target(root, overwrite=True)  # what every command on the directory does first
        said = capsys.readouterr().err.splitlines()
        seed = load_config(root / "config.json").seed
        outcomes.add(seed)
        assert (root / "notes.txt").read_text() == "mine", kill_at
        controller = (root / "controller.jsonl").read_text()
        assert (seed, controller) in ((1, '{"run":1}\n'), (2, "")), (kill_at, seed, controller)
        leftovers = sorted(p.name for p in root.parent.iterdir() if p.name != "run")
        assert leftovers == [], (kill_at, leftovers, said)
        if seed == 2:
            assert said and ("finished the replacement" in said[0] or "rolled back" in said[0]), (kill_at, said)
    assert outcomes == {1, 2}  # kills before the journal keep the previous run; after it, the new one


def test_the_next_command_finishes_a_swap_and_says_so_in_one_line(tmp_path: Path) -> None:
    root = tmp_path / "run"
    _previous_run(root)
    journal = tmp_path / ".run.swap"
    staging = tmp_path / ".run.starting-abc"
    new = RunDir(tmp_path / "other")
    new.write_config(SessionConfig(seed=2))
    new.start()
    new.close()
    os.rename(tmp_path / "other", staging)
    os.rename(root, tmp_path / ".run.replaced-abc")  # as if killed just after moving the previous run aside
    journal.write_text(json.dumps({"staging": staging.name, "trash": ".run.replaced-abc"}))
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", "--out", str(root)],
                          capture_output=True, text=True, timeout=120)
    assert done.stderr.splitlines()[0] == (f"combee: {root}: finished the replacement of its previous run that a "
                                           "stopped process left half done")
    assert "already holds a run" in done.stderr.splitlines()[1] and done.returncode == 2
    assert load_config(root / "config.json").seed == 2 and (root / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_swap_in_progress_is_not_touched_by_another_command(tmp_path: Path) -> None:
    root = tmp_path / "run"
    _previous_run(root)
    running = RunDir(root, overwrite=True)  # holds the previous run's lock and its own
    running.write_config(SessionConfig(seed=2))
    running.start()
    try:
        with pytest.raises(ConfigError, match="in use by another combee process"):
            RunDir(root, overwrite=True)
        check_run_target(root, overwrite=True)  # its staging folder is live: left alone
        assert running.root.exists()
    finally:
        running.close()
    assert running.location.name.startswith("run.unswapped-")
