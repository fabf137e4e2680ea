"""A new user's first contact, finding by finding, against real ``combee sim-server`` processes:
what used to report a silent 0.0% or refuse the README's own commands now works, or fails with
one line and a non-zero exit."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from combee_fast.learners import role_table
from combee_fast.tasks.registry import get_task

SRC = Path(__file__).resolve().parents[2]


def _combee(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd)


@contextmanager
def sim_server(*args: str) -> Iterator[str]:
    """A ``combee sim-server`` process on a free port with ``args``; its base URL."""
    server = subprocess.Popen([sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0", *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = server.stdout.readline().split()  # type: ignore[union-attr]
        assert first[:2] == ["listening", "on"], server.stderr.read() if server.poll() is not None else first
        yield first[2]
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def fast_server() -> Iterator[str]:
    with sim_server("--time-scale", "0.0005") as url:
        yield url


def _summary(done: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(done.stdout.strip().splitlines()[-1])


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.startswith("combee ")]
    assert len(lines) == 1, done.stderr
    return lines[0]


# -- finding 1: the standalone simulated server serves everything the in-process one does ----------


@pytest.mark.slow
def test_gepa_through_the_standalone_server_learns_and_its_eval_matches_the_in_process_one(
        fast_server: str, tmp_path: Path) -> None:
    out = tmp_path / "gepa"
    done = _combee("learn", "--task", "formula", "--method", "gepa", "--max-metric-calls", "300",
                   "--endpoint", fast_server, "--model", "sim", "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    assert _summary(done)["final_val_accuracy"] > 0.5
    remote = _combee("eval", "--split", "test[0:40]", "--playbook", str(out / "best.json"), "--endpoint", fast_server,
                     "--model", "sim", "--out", str(tmp_path / "remote"))
    local = _combee("eval", "--split", "test[0:40]", "--playbook", str(out / "best.json"), "--time-scale", "0.0001",
                    "--out", str(tmp_path / "local"))
    assert remote.returncode == 0 and local.returncode == 0, remote.stderr + local.stderr
    assert _summary(remote)["accuracy"] == _summary(local)["accuracy"] > 0.5


@pytest.mark.slow
def test_a_jsonl_task_is_served_by_its_own_world(tmp_path: Path) -> None:
    data = tmp_path / "q.jsonl"
    rows = get_task("finer").load("train[0:60]").examples
    data.write_text("".join(json.dumps({"q": e.input, "a": e.target}) + "\n" for e in rows))
    task = ["--task", "jsonl", "--data", str(data), "--task-option", "input_field=q", "--task-option", "target_field=a"]
    with sim_server("--time-scale", "0.0005", "--world", "jsonl", "--data", str(data),
                    "--task-option", "input_field=q", "--task-option", "target_field=a") as url:
        done = _combee("learn", *task, "--batch-size", "20",  # the file dealt into train/selection/test
                       "--endpoint", url, "--model", "sim", "--out", str(tmp_path / "j"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert _summary(done)["final_val_accuracy"] > 0.3


def test_a_server_that_echoes_instead_of_answering_stops_the_run_with_exit_3(tmp_path: Path) -> None:
    with sim_server("--time-scale", "0.0005", "--world", "echo") as url:
        gepa = _combee("learn", "--task", "formula", "--method", "gepa", "--max-metric-calls", "300",
                       "--val-split", "selection[0:20]", "--endpoint", url, "--model", "sim", "--out",
                       str(tmp_path / "g"), "--quiet")
        ace = _combee("learn", "--train-split", "train[0:20]", "--val-split", "selection[0:10]", "--batch-size", "10",
                      "--endpoint", url, "--model", "sim", "--out", str(tmp_path / "a"), "--quiet")
    for done, role in ((gepa, "gepa_solver"), (ace, "generator")):
        assert done.returncode == 3, done.stderr
        line = _one_line(done)
        assert "no_answer" in line and f"{role}: the answer is a copy of the question" in line
    errors = [json.loads(line) for line in (tmp_path / "g" / "errors.jsonl").read_text().splitlines()]
    assert errors and all(e["kind"] == "no_answer" and e["role"] == "gepa_solver" for e in errors)
    assert (tmp_path / "g" / "report.md").read_text().count("Failed (exit 3)") == 1


# -- finding 2: the quickstart's server command (docs/quickstart.md) can be learned against --------


@pytest.mark.slow
def test_the_readme_server_command_serves_the_readme_learn_command(tmp_path: Path) -> None:
    with sim_server() as url:  # the quickstart's defaults: the in-process endpoint's preset and time scale
        refused = _combee("learn", "--task", "formula", "--method", "combee", "--batch-size", "40",
                          "--endpoint", url, "--model", "my-model", "--out", str(tmp_path / "formula"))
        assert refused.returncode == 2
        assert _one_line(refused).endswith("does not list model 'my-model'; it lists 'sim'")
        assert not (tmp_path / "formula").exists()
        done = _combee("learn", "--task", "formula", "--method", "combee", "--batch-size", "40",
                       "--endpoint", url, "--model", "sim", "--out", str(tmp_path / "formula"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert _summary(done)["final_val_accuracy"] > 0.8


def test_a_failed_run_is_named_when_its_folder_is_reused(tmp_path: Path) -> None:
    out = tmp_path / "r"
    with sim_server("--time-scale", "0.0005", "--world", "echo") as url:
        failed = _combee("learn", "--train-split", "train[0:10]", "--val-split", "selection[0:5]", "--batch-size",
                         "10", "--endpoint", url, "--model", "sim", "--out", str(out), "--quiet")
    assert failed.returncode == 3 and json.loads((out / "summary.json").read_text())["failed"]
    again = _combee("learn", "--train-split", "train[0:10]", "--val-split", "selection[0:5]", "--out", str(out))
    assert again.returncode == 2
    assert "holds a run that failed" in _one_line(again) and "--overwrite" in _one_line(again)


# -- finding 3: the default selection split never holds test rows -------------------------------


def _row_keys(examples) -> set[str]:
    return {hashlib.sha256(f"{e.input}\x00{e.target}".encode()).hexdigest() for e in examples}


@pytest.mark.slow
def test_learn_with_default_splits_then_eval_on_test_reports_rows_the_selection_never_saw(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _combee("learn", "--train-split", "train[0:40]", "--batch-size", "20", "--sim-preset", "flat",
                   "--time-scale", "0.0001", "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    manifests = json.loads((out / "splits.json").read_text())
    assert manifests[1]["split"] == "selection"
    evaluated = _combee("eval", "--split", "test", "--playbook", str(out / "best.json"), "--sim-preset", "flat",
                        "--time-scale", "0.0001", "--out", str(tmp_path / "test"))
    assert evaluated.returncode == 0, evaluated.stderr
    assert "warning" not in evaluated.stderr and _summary(evaluated)["seen_rows"] == {}
    tested = {json.loads(line)["row"] for line in (tmp_path / "test" / "results.jsonl").read_text().splitlines()}
    formula = get_task("formula")
    assert len(tested) == 100 and tested == _row_keys(formula.load("test").examples)
    assert not tested & _row_keys(formula.load(manifests[1]["split"]).examples)
    assert not tested & _row_keys(formula.load(manifests[0]["split"]).examples)
    on_val = _combee("eval", "--split", "val", "--playbook", str(out / "best.json"), "--sim-preset", "flat",
                     "--time-scale", "0.0001", "--out", str(tmp_path / "val"))
    assert on_val.returncode == 0 and "200 rows of val were seen by the run" in on_val.stderr


def test_selecting_on_a_split_that_overlaps_the_test_split_is_refused_naming_the_overlap(tmp_path: Path) -> None:
    for spec, shared in (("val", 100), ("val[150:250]", 50)):
        done = _combee("learn", "--val-split", spec, "--out", str(tmp_path / "r"))
        assert done.returncode == 2
        assert f"split '{spec}' shares {shared} of its" in _one_line(done) and "test split 'test'" in _one_line(done)
    assert not (tmp_path / "r").exists()


# -- finding 6: one page per run; show and compare -----------------------------------------------


@pytest.mark.slow
def test_every_run_directory_has_its_page_and_prompt_and_compare_tabulates_seeds(tmp_path: Path) -> None:
    runs = []
    for seed in (0, 1):
        out = tmp_path / f"s{seed}"
        done = _combee("learn", "--train-split", "train[0:20]", "--val-split", "selection[0:20]", "--batch-size", "10",
                       "--eval-every", "1", "--seed", str(seed), "--sim-preset", "flat", "--time-scale", "0.0001",
                       "--out", str(out), "--quiet")
        assert done.returncode == 0, done.stderr
        runs.append(str(out))
    page = (tmp_path / "s0" / "report.md").read_text()
    for part in ("## Result", "95% CI", "## Cost", "## What was learned", "## Provenance", "git commit", "command",
                 "started (UTC)", "sha256", "![validation accuracy against training time](curve.png)"):
        assert part in page, part
    provenance = json.loads((tmp_path / "s0" / "provenance.json").read_text())
    assert provenance["seed"] == 0 and provenance["ended"] and provenance["version"]
    assert "--seed 0" in provenance["command"] and len(provenance["splits"]) == 2
    shown = _combee("show", runs[0])
    assert shown.returncode == 0 and shown.stdout == (tmp_path / "s0" / "prompt.txt").read_text()
    assert "helpful=" in shown.stdout
    compared = _combee("compare", *runs)
    assert compared.returncode == 0, compared.stderr
    assert "Across seeds" in compared.stdout and "0, 1" in compared.stdout and runs[1] in compared.stdout
    assert _combee("compare", str(tmp_path)).returncode == 2


# -- finding 7: progress a person can read ----------------------------------------------------------


def test_progress_lines_count_steps_and_time_and_name_the_artifact_in_its_unit(fast_server: str,
                                                                               tmp_path: Path) -> None:
    ace = _combee("learn", "--train-split", "train[0:40]", "--val-split", "selection[0:10]", "--batch-size", "20",
                  "--sim-preset", "flat", "--time-scale", "0.0001", "--out", str(tmp_path / "a"))
    lines = [line for line in ace.stderr.splitlines() if line.startswith("[combee] step")]
    assert lines[0].startswith("[combee] step 1 of ~2  samples 20 of 40 (50%)  elapsed 0:00:0")
    assert all("eta " in line and "bullets " in line and "sim " in line for line in lines)
    gepa = _combee("learn", "--method", "gepa", "--max-metric-calls", "60", "--val-split", "selection[0:10]",
                   "--endpoint", fast_server, "--model", "sim", "--out", str(tmp_path / "g"))
    lines = [line for line in gepa.stderr.splitlines() if line.startswith("[gepa] step")]
    assert lines and all("candidates " in line and "metric calls " in line and "bullets" not in line for line in lines)
    assert "sim " in lines[-1]  # the standalone simulated server says its time scale


# -- finding 8: conventions peer users expect -------------------------------------------------------


def test_help_shows_no_internal_names_and_only_the_flags_a_command_uses() -> None:
    learn = _combee("learn", "--help").stdout
    assert "CFG__" not in learn and "--batch-size BATCH_SIZE" in learn and "--role-endpoint ROLE=URL" in learn
    evaluate = _combee("eval", "--help").stdout
    assert "CFG__" not in evaluate and "--role-endpoint ROLE=URL" in evaluate
    for unused in ("--batch-size", "--epochs"):
        assert unused not in evaluate, unused


def test_openai_base_url_names_the_endpoint(fast_server: str, tmp_path: Path) -> None:
    env = {"OPENAI_BASE_URL": fast_server}
    missing = _combee("learn", "--out", str(tmp_path / "m"), env=env)
    assert missing.returncode == 2 and "OPENAI_BASE_URL is set" in _one_line(missing)
    done = _combee("learn", "--train-split", "train[0:10]", "--val-split", "selection[0:5]", "--batch-size", "10",
                   "--model", "sim", "--out", str(tmp_path / "r"), "--quiet", env=env)
    assert done.returncode == 0, done.stderr
    (endpoint,) = json.loads((tmp_path / "r" / "capabilities.json").read_text())
    assert endpoint["roles"] == ["generator", "reflector", "curator", "reducer"] and fast_server in json.dumps(endpoint)


async def test_openai_api_key_is_the_key_of_an_endpoint_given_none(start_sim_server, tmp_path: Path) -> None:
    import asyncio

    from combee_fast.sim.world import TaskWorld

    server = await start_sim_server(TaskWorld.for_task(get_task("formula"), roles=role_table()), time_scale=0.0005,
                                    api_key="sk-test-1234567890")
    args = ["learn", "--train-split", "train[0:10]", "--val-split", "selection[0:5]", "--batch-size", "10",
            "--endpoint", server.url, "--model", "sim", "--quiet"]

    async def learn(out: str, **env: str) -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "combee_fast.cli", *args, "--out", str(tmp_path / out),
            env={**os.environ, **env}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, errors = await asyncio.wait_for(process.communicate(), 300)
        return process.returncode or 0, errors.decode()

    code, errors = await learn("without")
    assert code == 2 and "rejected the credentials" in errors
    code, errors = await learn("with", OPENAI_API_KEY="sk-test-1234567890")
    assert code == 0, errors
    assert "sk-test-1234567890" not in (tmp_path / "with" / "config.json").read_text()


def test_mlflow_logs_a_run_to_a_local_file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed (pip install -e '.[mlflow]')")
    from mlflow.tracking import MlflowClient

    store = tmp_path / "mlruns"
    done = _combee("learn", "--train-split", "train[0:20]", "--val-split", "selection[0:10]", "--batch-size", "10",
                   "--eval-every", "1", "--sim-preset", "flat", "--time-scale", "0.0001", "--out",
                   str(tmp_path / "run"), "--quiet", "--mlflow", "--mlflow-uri", str(store),
                   "--mlflow-experiment", "first-contact", "--price", "2/8")
    assert done.returncode == 0, done.stderr
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=f"file:{store}")
    experiment = client.get_experiment_by_name("first-contact")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    assert run.data.params["method"] == "combee" and run.data.params["train.batch_size"] == "10"
    history = client.get_metric_history(run.info.run_id, "val_accuracy")
    ledger = [json.loads(line) for line in (tmp_path / "run" / "ledger.jsonl").read_text().splitlines()]
    validated = [row for row in ledger if row["val_accuracy"] is not None]
    assert len(validated) >= 2
    assert [(m.step, m.value) for m in history] == [(row["step"] + 1, row["val_accuracy"]) for row in validated]
    spent, logged = 0.0, []  # the dollars so far at each step, as the ledger's rows add them up
    for row in ledger:
        spent += sum(row["dollars"].values())
        logged.append((row["step"] + 1, spent))
    dollars = [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "dollars")]
    assert [step for step, _ in dollars] == [step for step, _ in logged] and spent > 0
    assert all(abs(value - expected) < 1e-9 for (_, value), (_, expected) in zip(dollars, logged))
    assert run.data.tags["combee.ends"] == "done"
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"report.md", "prompt.txt", "final.json", "best.json", "summary.json"} <= artifacts


def test_mlflow_logs_no_dollars_for_a_run_whose_cost_is_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the generator priced: the run's cost is unknown, never logged as a number."""
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed (pip install -e '.[mlflow]')")
    from mlflow.tracking import MlflowClient

    store = tmp_path / "mlruns"
    done = _combee("learn", "--train-split", "train[0:10]", "--val-split", "selection[0:5]", "--batch-size", "10",
                   "--sim-preset", "flat", "--time-scale", "0.0001", "--out", str(tmp_path / "run"), "--quiet",
                   "--mlflow", "--mlflow-uri", str(store), "--mlflow-experiment", "unpriced", "--price", "generator=2/8")
    assert done.returncode == 0, done.stderr
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=f"file:{store}")
    (run,) = client.search_runs([client.get_experiment_by_name("unpriced").experiment_id])
    assert client.get_metric_history(run.info.run_id, "tokens")  # the step was logged
    assert client.get_metric_history(run.info.run_id, "dollars") == []
