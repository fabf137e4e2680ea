"""First contact, round two (issue 35): a newcomer's own data, the end of every run, nothing
silent. Each test reproduces one finding against real processes, files and (where one is
needed) a real ``combee sim-server`` on loopback."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from combee_fast.tasks.registry import get_task
from tests.docs_pages import SERVER_URL, block_of

SRC = Path(__file__).resolve().parents[2]
DOCS = SRC / "docs"


def _combee(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd)


def _summary(done: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(done.stdout.strip().splitlines()[-1])


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.startswith("combee ")]
    assert len(lines) == 1 and done.stderr.count("\n") == 1, done.stderr
    return lines[0]


def _qa_file(path: Path, rows: int = 100) -> Path:
    examples = get_task("formula").load(f"train[0:{rows}]").examples
    path.write_text("".join(json.dumps({"q": e.input, "a": e.target}) + "\n" for e in examples))
    return path


# -- finding 1: own data, as the docs say it -----------------------------------------------------


def test_a_one_file_jsonl_task_is_dealt_into_train_selection_and_test_by_content(tmp_path: Path) -> None:
    data = _qa_file(tmp_path / "q.jsonl")
    task = get_task("jsonl", path=data, input_field="q", target_field="a")
    splits = {name: task.load(name) for name in ("train", "selection", "test")}
    keys = {name: {(e.input, e.target) for e in split.examples} for name, split in splits.items()}
    assert sum(len(k) for k in keys.values()) == 100 and all(len(k) >= 10 for k in keys.values())
    assert not (keys["train"] & keys["test"]) and not (keys["selection"] & keys["test"])
    lines = data.read_text().splitlines()
    shuffled = get_task("jsonl", path=_write(tmp_path / "r.jsonl", lines[::-1]), input_field="q", target_field="a")
    assert {(e.input, e.target) for e in shuffled.load("test").examples} == keys["test"]  # by content, not order
    assert task.load("train[0:5]").manifest.rows == 5 and task.load("all").manifest.rows == 100
    assert get_task("jsonl", path=data, hash_splits="false").split_names() == ("all",)


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_learn_on_a_jsonl_file_with_the_default_splits_works(tmp_path: Path) -> None:
    data = _qa_file(tmp_path / "q.jsonl", rows=60)
    done = _combee("learn", "--task", "jsonl", "--data", str(data), "--task-option", "input_field=q",
                   "--task-option", "target_field=a", "--batch-size", "20", "--time-scale", "0.0001",
                   "--out", str(tmp_path / "run"), "--quiet")
    assert done.returncode == 0, done.stderr
    splits = [s["split"] for s in json.loads((tmp_path / "run" / "splits.json").read_text())]
    assert splits == ["train", "selection"]
    assert _summary(done)["final_val_accuracy"] > 0.2


def test_a_missing_jsonl_file_is_one_line_naming_it(tmp_path: Path) -> None:
    done = _combee("learn", "--task", "jsonl", "--data", "nope.jsonl", "--task-option", "input_field=q",
                   "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 2
    assert "'nope.jsonl', which does not exist" in _one_line(done)
    assert not (tmp_path / "run").exists()


DOCS_OWN_DATA = (
    "python -c \"import json; from combee_fast.tasks import get_task; [print(json.dumps({'q': e.input, "
    "'a': e.target})) for e in get_task('formula').load('train[0:100]').examples]\" > my.jsonl",
    "combee learn --task jsonl --data my.jsonl --task-option input_field=q --task-option target_field=a "
    "--batch-size 20 --out runs/mine",
    "combee eval --task jsonl --data my.jsonl --task-option input_field=q --task-option target_field=a "
    "--artifact runs/mine/best.json",
)


def test_the_docs_own_data_commands_run_as_written(tmp_path: Path) -> None:
    given = block_of("docs/your-data.md", "> my.jsonl", "bash").code.splitlines()
    bin_dir = Path(sys.executable).parent
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(SRC)}
    for command in DOCS_OWN_DATA:
        assert command in given, command
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                              env={**os.environ, **env})
        assert done.returncode == 0, (command, done.stderr)
    assert json.loads(done.stdout.strip().splitlines()[-1])["accuracy"] > 0.2


# -- finding 20: --version, "did you mean", an unreachable http endpoint said plainly -------------


def test_combee_version_prints_the_package_version() -> None:
    from combee_fast import __version__

    done = _combee("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"combee {__version__}"


@pytest.mark.parametrize(("args", "hint"), [
    (("learn", "--batchsize", "40"), "unrecognized arguments: --batchsize 40 (did you mean '--batch-size'?)"),
    (("learn", "--task", "formla"), "unknown task 'formla' (did you mean 'formula'?)"),
    (("learn", "--method", "combe"), "unknown method 'combe' (did you mean 'combee'?)"),
    (("lern",), "invalid choice: 'lern' (choose from"),
    (("learn", "--staleness", "ful"), "(did you mean 'full'?)"),
])
def test_a_mistyped_flag_task_method_or_command_is_told_the_closest_one(tmp_path: Path, args, hint) -> None:
    done = _combee(*args, "--out", str(tmp_path / "run"), cwd=tmp_path) if args[0] == "learn" else _combee(*args)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert hint in done.stderr
    assert "did you mean" in done.stderr
    assert not (tmp_path / "run").exists()


def test_an_unreachable_http_endpoint_is_said_without_ssl(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = _combee("learn", "--endpoint", f"http://127.0.0.1:{port}/v1", "--model", "sim",
                   "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    line = _one_line(done)
    assert "ssl" not in line and f"cannot connect to 127.0.0.1:{port}: Connection refused" in line


# -- finding 15: every run ends with a human summary on stderr ------------------------------------


def test_a_learn_run_ends_with_a_human_summary_naming_score_cost_and_files(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _combee("learn", "--train-split", "train[0:40]", "--val-split", "selection[0:20]", "--batch-size", "20",
                   "--time-scale", "0.0001", "--out", str(out))
    assert done.returncode == 0, done.stderr
    summary = _summary(done)
    tail = done.stderr.strip().splitlines()[-7:]
    assert tail[0].startswith("Run finished in ") and f"{summary['tokens']:,} tokens" in tail[0]
    assert f"{summary['calls']:,} calls" in tail[0]
    assert tail[1].startswith("  cost: unknown (no price); give each endpoint's price: --price")  # docs/cost.md
    assert tail[2] == f"  best validation on selection[0:20]: {100 * summary['best_val_accuracy']:.1f}%"
    assert "% CI " in tail[3] and "(20 of 20 examples answered)" in tail[3]
    for line, name in zip(tail[4:], ("prompt.txt", "best.json", "report.md")):
        shown = line.split()[1]
        assert shown == str(out / name) and Path(shown).is_file()
    quiet = _combee("learn", "--train-split", "train[0:20]", "--val-split", "selection[0:10]", "--batch-size", "20",
                    "--time-scale", "0.0001", "--out", str(tmp_path / "quiet"), "--quiet")
    assert quiet.returncode == 0 and "Run finished" not in quiet.stderr


# -- finding 10: a replay needs no live endpoint ---------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_replay_runs_with_its_endpoint_down_and_gives_the_same_playbook(tmp_path: Path) -> None:
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", str(port),
                               "--time-scale", "0.0001"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/v1"
    run = ("learn", "--train-split", "train[0:20]", "--val-split", "selection[0:10]", "--batch-size", "10",
           "--endpoint", url, "--model", "sim", "--cache", str(tmp_path / "cache.jsonl"), "--quiet")
    try:
        assert server.stdout.readline().startswith("listening on"), server.stderr.read()  # type: ignore[union-attr]
        recorded = _combee(*run, "--cache-mode", "record", "--out", str(tmp_path / "rec"))
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert recorded.returncode == 0, recorded.stderr
    replayed = _combee(*run, "--cache-mode", "replay", "--out", str(tmp_path / "rep"))  # nothing listens now
    assert replayed.returncode == 0, replayed.stderr
    assert (tmp_path / "rep" / "final.json").read_bytes() == (tmp_path / "rec" / "final.json").read_bytes()


# -- finding 13: --env on a single-call task with no agent of the user's own ----------------------


def test_an_environment_for_a_single_call_task_without_an_agent_is_one_line(tmp_path: Path) -> None:
    done = _combee("learn", "--task", "formula", "--env", "tests.rollouts.environments:counting",
                   "--train-split", "train[0:10]", "--val-split", "selection[0:5]", "--batch-size", "10",
                   "--time-scale", "0.0001", "--out", str(tmp_path / "run"), cwd=SRC)
    assert done.returncode == 2
    line = _one_line(done)
    assert "task 'formula' is single-call" in line and "--agent package.module:factory" in line
    assert not (tmp_path / "run").exists()


# -- finding 5: the terminal task against the default sim-server ----------------------------------


def test_a_task_the_sim_server_does_not_play_is_one_line_naming_its_world(tmp_path: Path) -> None:
    server = subprocess.Popen([sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0",
                               "--time-scale", "0.0001"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = server.stdout.readline().split()  # type: ignore[union-attr]
        assert first[:2] == ["listening", "on"], server.stderr.read()  # type: ignore[union-attr]
        done = _combee("learn", "--task", "terminal", "--sandbox", "none", "--endpoint", first[2], "--model", "sim",
                       "--out", str(tmp_path / "run"))
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert done.returncode == 2
    line = _one_line(done)
    assert "is a combee sim-server playing formula, finer, not task 'terminal'" in line
    assert line.endswith("start it with `combee sim-server --world terminal`")
    assert not (tmp_path / "run").exists()
    for command in (("learn", "--help"), ("sim-server", "--help")):
        assert "--world terminal" in " ".join(_combee(*command).stdout.split()) or \
            "terminal (the agent task)" in " ".join(_combee(*command).stdout.split())


# -- finding 4: --mlflow at a dead address, or without mlflow installed ---------------------------


def _nothing_made(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name not in ("mlruns", "fake")], list(folder.iterdir())


def test_mlflow_at_an_address_where_nothing_listens_fails_fast_and_leaves_nothing(tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    import time

    started = time.monotonic()
    done = _combee("learn", "--train-split", "train[0:10]", "--val-split", "selection[0:5]", "--batch-size", "10",
                   "--mlflow", "--mlflow-uri", f"http://127.0.0.1:{_free_port()}", "--out", str(tmp_path / "run"),
                   cwd=tmp_path, timeout=60)
    assert time.monotonic() - started < 30
    assert done.returncode == 2
    assert "--mlflow: the tracking server http://127.0.0.1:" in _one_line(done) and "Connection refused" in done.stderr
    _nothing_made(tmp_path)


def test_sigterm_ends_a_run_waiting_for_a_silent_tracking_server_and_leaves_nothing(tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    import signal
    import socket
    import time

    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        run = subprocess.Popen([sys.executable, "-m", "combee_fast.cli", "learn", "--train-split", "train[0:10]",
                                "--val-split", "selection[0:5]", "--batch-size", "10", "--mlflow", "--mlflow-uri",
                                f"http://127.0.0.1:{silent.getsockname()[1]}", "--out", str(tmp_path / "run")],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(4)
        assert run.poll() is None, run.communicate()
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=15)
    assert run.returncode != 0
    _nothing_made(tmp_path)


def test_mlflow_without_the_package_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    fake = tmp_path / "fake" / "mlflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named mlflow')\n")
    done = _combee("learn", "--train-split", "train[0:10]", "--val-split", "selection[0:5]", "--batch-size", "10",
                   "--mlflow", "--out", str(tmp_path / "run"), cwd=tmp_path,
                   env={"PYTHONPATH": os.pathsep.join([str(fake.parent), str(SRC)])})
    assert done.returncode == 2
    assert "--mlflow needs MLflow: pip install -e '.[mlflow]'" in _one_line(done)
    _nothing_made(tmp_path)


# -- finding 11: the docs' run.toml serves learn against a sim-server, and verify ---------------


def _docs_run_toml() -> tuple[str, list[str]]:
    """The ``run.toml`` block of the claims page and the two commands given with it (learn, verify),
    their comments left out."""
    toml = block_of("docs/cards.md", "# run.toml", "toml").code
    learn = block_of("docs/cards.md", "combee learn --config run.toml", "bash").code
    verify = block_of("docs/cards.md", "combee verify cards/formula.toml --config run.toml", "bash").code
    return toml, [shlex.join(shlex.split(command, comments=True)) for command in (learn, verify)]


@pytest.mark.slow
def test_the_docs_run_toml_learns_against_a_sim_server_and_is_taken_by_verify(tmp_path: Path) -> None:
    toml, commands = _docs_run_toml()
    (tmp_path / "run.toml").write_text(toml)
    learn, verify = commands
    assert learn.startswith("combee learn --config run.toml") and verify.startswith("combee verify")
    server = subprocess.Popen([sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0",
                               "--time-scale", "0.0005"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().split()[2]  # type: ignore[union-attr]
        args = learn.replace(SERVER_URL, url).split()[1:]
        done = _combee(*args, "--quiet", cwd=tmp_path)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert done.returncode == 0, done.stderr
    assert _summary(done)["final_val_accuracy"] > 0.5
    import shutil

    shutil.copytree(SRC / "cards", tmp_path / "cards")
    verifying = subprocess.Popen([sys.executable, "-m", "combee_fast.cli", *verify.split()[1:]], cwd=tmp_path,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:  # a refused configuration is one line and exit 2 at once; an accepted one runs its cells
        code = verifying.wait(timeout=8)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        verifying.terminate()
        _, errors = verifying.communicate(timeout=60)
    assert code is None, errors


# -- finding 12: a GEPA budget that cannot pay for one step; progress past the budget --------------


def test_a_gepa_budget_that_cannot_pay_for_one_step_is_refused_before_spending(tmp_path: Path) -> None:
    done = _combee("learn", "--method", "gepa", "--max-metric-calls", "100", "--time-scale", "0.0001",
                   "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    line = _one_line(done)
    assert "--max-metric-calls 100 cannot pay for one GEPA step" in line and "takes 200 metric calls" in line
    assert "give at least 206" in line and "--val-split 'selection[0:50]'" in line
    assert not (tmp_path / "run").exists()
    ok = _combee("learn", "--method", "gepa", "--max-metric-calls", "26", "--val-split", "selection[0:20]",
                 "--time-scale", "0.0001", "--out", str(tmp_path / "ok"), "--quiet")
    assert ok.returncode == 0, ok.stderr


def test_progress_past_the_budget_never_shows_more_than_the_whole(tmp_path: Path) -> None:
    done = _combee("learn", "--method", "gepa", "--max-metric-calls", "30", "--val-split", "selection[0:20]",
                   "--time-scale", "0.0001", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    spent = _summary(done)["metric_calls"]
    lines = [line for line in done.stderr.splitlines() if line.startswith("[gepa] step")]
    assert spent > 30 and lines[-1].split("  ")[1] == f"metric calls {spent} (budget 30, the last step went past it)"
    assert not any(" of 30 (" in line and int(line.split("metric calls ")[1].split()[0]) > 30 for line in lines)


# -- finding 6: the progress bar in a narrow terminal, and after --resume --------------------------


class _Terminal(__import__("io").StringIO):
    """A terminal of the width ``COLUMNS`` says."""

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("no file descriptor")


async def test_the_live_bar_folds_its_fields_in_a_narrow_terminal_and_cuts_none(monkeypatch) -> None:
    import re

    from combee_fast.config import SessionConfig, SimConfig, TaskConfig
    from combee_fast.run.batch_plans import FixedBatch
    from combee_fast.run.events import Events
    from combee_fast.session import open_session

    monkeypatch.setenv("COLUMNS", "80")
    stream = _Terminal()
    config = SessionConfig(task=TaskConfig(train_split="train[0:16]", val_split="selection[0:10]"),
                           sim=SimConfig("flat", 1e-4))
    async with open_session(config) as session:
        progress = session.progress(stream=stream)
        result = await session.train(plan=FixedBatch(8), events=Events(progress))
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", stream.getvalue())
    last = screen.split("[combee] step")[-1]
    assert "…" not in screen and all(len(line) <= 80 for line in screen.splitlines())
    text = " ".join(last.split())
    assert f"bullets {len(result.final)}" in text and "samples 16 of 16 (100%)" in text and "val " in text


def test_a_resumed_run_counts_the_work_of_its_earlier_session(tmp_path: Path) -> None:
    import signal
    import time

    out = tmp_path / "run"
    args = ["learn", "--train-split", "train[0:60]", "--val-split", "selection[0:10]", "--batch-size", "10",
            "--sim-preset", "flat", "--time-scale", "0.02", "--out", str(out)]
    first = subprocess.Popen([sys.executable, "-m", "combee_fast.cli", *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out / "checkpoint.bin").exists():
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)
    _, stopped = first.communicate(timeout=120)
    assert first.returncode == 130, stopped
    done = _combee("learn", "--resume", str(out))
    assert done.returncode == 0, done.stderr
    steps = [line for line in done.stderr.splitlines() if line.startswith("[combee] step")]
    assert _summary(done)["resumed_from_step"] >= 1
    assert "samples 60 of 60 (100%)" in steps[-2] or "samples 60 of 60 (100%)" in steps[-1]
    assert steps[0].startswith(f"[combee] step {_summary(done)['resumed_from_step'] + 1} ")


# -- finding 9: the GEPA interop block against a sim-server without --peers ------------------------


def _interop_block() -> str:
    return block_of("docs/peers.md", "CombeeReflectionStrategy(lm)", "python").code


def test_the_gepa_interop_block_without_peers_stops_at_its_check_and_the_server_says_why(tmp_path: Path) -> None:
    pytest.importorskip("gepa")
    text = (DOCS / "peers.md").read_text()
    assert text.index("`combee sim-server --port 8000 --peers`") < text.index("CombeeReflectionStrategy(lm)")
    server = subprocess.Popen([sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0",
                               "--time-scale", "0.0005"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().split()[2]  # type: ignore[union-attr]
        done = subprocess.run([sys.executable, "-c", _interop_block().replace(SERVER_URL, url)],
                              capture_output=True, text=True, timeout=600, cwd=tmp_path)
    finally:
        server.terminate()
        _, said = server.communicate(timeout=30)
    assert done.returncode != 0 and "is the server a combee sim-server started with --peers?" in done.stderr
    assert said.count("start the server with --peers") == 1


# -- finding 2: the docs' example agent, from the working directory, against the simulated endpoint


@pytest.mark.skipif(__import__("shutil").which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")
def test_the_docs_agent_imports_from_the_working_directory_and_solves_chores(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "combee"
    if not script.exists():
        pytest.skip("no combee console script beside this interpreter (pip install -e .)")
    (tmp_path / "mymodule.py").write_text(block_of("docs/agents.md", "# mymodule.py", "python").code)
    done = subprocess.run([str(script), "learn", "--task", "terminal", "--agent", "mymodule:make_agent",
                           "--train-split", "train[0:20]", "--val-split", "selection[0:10]", "--batch-size", "10",
                           "--time-scale", "0.0001", "--out", "run", "--quiet"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(SRC)})  # not the folder
    assert done.returncode == 0, done.stderr
    episodes = [json.loads(line) for line in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()]
    commands = [json.loads(e["episode"]["steps"][0]["action"]["arguments"])["command"] for e in episodes]
    assert not any(command.startswith("{") for command in commands)  # a shell line, not a JSON reply
    assert any(e["score"] == 1.0 for e in episodes) and _summary(done)["final_val_accuracy"] > 0


# -- finding 8: the first --batch-size auto run says it is compiling kernels -----------------------


async def test_a_slow_kernel_warm_up_is_said_when_it_begins_and_when_it_ends() -> None:
    import io
    import time

    from combee_fast.engine.slow_wait import NOTICE_AFTER_S
    from combee_fast.readout.notices import WaitNotices
    from combee_fast.run.batch_plans import compiled
    from combee_fast.run.events import Events

    stream = io.StringIO()
    hub = Events(WaitNotices(stream))
    await compiled(lambda: time.sleep(NOTICE_AFTER_S + 0.5), hub)  # a cold cache: longer than the notice wait
    slow = stream.getvalue().splitlines()
    await compiled(lambda: None, hub)  # a warm cache: nothing said
    assert stream.getvalue().splitlines() == slow and len(slow) == 2
    assert slow[0].startswith("[compiling] the batch planner's Numba kernels (first run on this machine")
    assert slow[1].startswith("[compiling] kernels ready after ")


@pytest.mark.slow
def test_the_first_auto_batch_run_on_a_cold_cache_says_it_compiles(tmp_path: Path) -> None:
    (tmp_path / "run.toml").write_text('[controller]\nmode = "paper"\n')
    done = _combee("learn", "--config", str(tmp_path / "run.toml"), "--batch-size", "auto", "--train-split",
                   "train[0:20]", "--val-split", "selection[0:5]", "--time-scale", "0.0001", "--out",
                   str(tmp_path / "run"), env={"NUMBA_CACHE_DIR": str(tmp_path / "numba")})  # nothing cached
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    begins = next(i for i, line in enumerate(lines) if line.startswith("[compiling] the batch planner's"))
    assert lines[begins + 1].startswith("[compiling] kernels ready after ")
    assert begins < next(i for i, line in enumerate(lines) if line.startswith("[combee] step 1"))


def test_probing_a_slow_endpoint_is_said_when_it_begins_and_when_it_ends(tmp_path: Path) -> None:
    server = subprocess.Popen([sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0",
                               "--constant-latency", "1.5", "--time-scale", "1"],  # each completion takes 1.5 s
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().split()[2]  # type: ignore[union-attr]
        done = _combee("learn", "--train-split", "train[0:2]", "--val-split", "selection[0:1]", "--batch-size", "2",
                       "--endpoint", url, "--model", "sim", "--out", str(tmp_path / "run"))
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    begins = lines.index(f"[probing] {url} (model, structured output)...")
    assert lines[begins + 1].startswith("[probing] done in ")
    assert float(lines[begins + 1].split()[3]) >= 1.5  # the structured-output probe is one completion
    assert begins < next(i for i, line in enumerate(lines) if line.startswith("[combee] step 1"))


# -- finding 18: compare names the task of the run and of an evaluation of another task ------------


def test_compare_names_the_task_and_keeps_another_tasks_evaluation_apart(tmp_path: Path) -> None:
    run = tmp_path / "formula"
    fast = ("--time-scale", "0.0001")
    done = _combee("learn", "--train-split", "train[0:10]", "--val-split", "selection[0:10]", "--batch-size", "10",
                   *fast, "--out", str(run), "--quiet")
    assert done.returncode == 0, done.stderr
    for task in ("formula", "finer"):
        scored = _combee("eval", "--task", task, "--split", "test[0:10]", "--playbook", str(run / "best.json"), *fast,
                         "--out", str(run / f"eval-{task}"))
        assert scored.returncode == 0, scored.stderr
    shown = _combee("compare", str(run))
    assert shown.returncode == 0, shown.stderr
    header, _, row = shown.stdout.splitlines()[:3]
    cells = dict(zip([c.strip() for c in header.strip("|").split("|")], [c.strip() for c in row.strip("|").split("|")]))
    finer = json.loads((run / "eval-finer" / "eval.json").read_text())["accuracy"]
    formula = json.loads((run / "eval-formula" / "eval.json").read_text())["accuracy"]
    assert cells["task"] == "formula"
    assert cells["test[0:10]"].startswith(f"{100 * formula:.1f}% [")
    assert cells["finer test[0:10]"].startswith(f"{100 * finer:.1f}% [")


# -- finding 16: without --eval-every a run validates at each quarter of its budget ---------------


def test_a_run_without_eval_every_draws_a_curve_and_learns_the_same_final_artifact(tmp_path: Path) -> None:
    runs = {}
    for name, extra in (("auto", ()), ("end", ("--eval-every", "0"))):
        out = tmp_path / name
        done = _combee("learn", "--train-split", "train[0:80]", "--val-split", "selection[0:10]", "--batch-size", "10",
                       "--time-scale", "0.0001", "--out", str(out), "--quiet", *extra)
        assert done.returncode == 0, done.stderr
        ledger = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
        runs[name] = [row["step"] + 1 for row in ledger if row["val_accuracy"] is not None]
    assert runs == {"auto": [2, 4, 6, 9], "end": [9]}  # 8 steps of 10 samples and the drain
    assert (tmp_path / "auto" / "curve.png").is_file() and not (tmp_path / "end" / "curve.png").exists()
    assert (tmp_path / "auto" / "final.json").read_bytes() == (tmp_path / "end" / "final.json").read_bytes()
