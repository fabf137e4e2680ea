"""The `combee` command in real processes: bad flags and dead endpoints give one line and exit 2."""

from __future__ import annotations

import json
import socket
import subprocess
import sys


def _combee(*args: str, cwd=None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def test_a_bad_flag_value_is_one_line_and_exit_2() -> None:
    done = _combee("learn", "--batch-size", "lots")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "--batch-size" in done.stderr and "'lots'" in done.stderr


def test_an_unknown_flag_is_one_line_and_exit_2() -> None:
    done = _combee("learn", "--bogus")
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "--bogus" in done.stderr


def test_an_unreachable_endpoint_is_one_line_and_exit_2(tmp_path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = _combee("learn", "--endpoint", f"http://127.0.0.1:{port}/v1", "--model", "m", "--out", str(tmp_path / "r"))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert f"127.0.0.1:{port}" in done.stderr


def test_learn_then_eval_on_the_simulated_endpoint(tmp_path) -> None:
    out = tmp_path / "run"
    done = _combee(
        "learn", "--train-split", "train[0:30]", "--val-split", "val[0:20]", "--batch-size", "10",
        "--sim-preset", "flat", "--time-scale", "0.0001", "--out", str(out), "--quiet",
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["samples"] == 30 and summary["bullets"] > 0
    assert summary["rollouts"] >= 30 and summary["gpu_seconds"] > 0
    for name in ("config.json", "splits.json", "ledger.jsonl", "final.json", "best.json", "summary.json"):
        assert (out / name).exists(), name
    assert list((out / "playbooks").glob("v*.json"))
    scores = []
    for flag in ("--artifact", "--playbook"):  # --playbook: the flag's older name, still taken
        evaluated = _combee("eval", "--split", "val[0:20]", flag, str(out / "best.json"),
                            "--sim-preset", "flat", "--time-scale", "0.0001", "--out", str(tmp_path / f"eval{flag}"))
        assert evaluated.returncode == 0, evaluated.stderr
        scores.append(json.loads(evaluated.stdout))
    assert scores[0]["examples"] == 20 and scores[0]["accuracy"] == scores[1]["accuracy"]


def test_eval_without_an_artifact_names_the_flag() -> None:
    done = _combee("eval", "--split", "val[0:5]")
    assert done.returncode == 2 and "--artifact" in done.stderr


def test_eval_refuses_a_split_whose_recorded_hash_changed(tmp_path) -> None:
    out = tmp_path / "run"
    assert _combee("learn", "--train-split", "train[0:10]", "--val-split", "val[0:10]", "--batch-size", "10",
                   "--sim-preset", "flat", "--time-scale", "0.0001", "--out", str(out), "--quiet").returncode == 0
    manifests = json.loads((out / "splits.json").read_text())
    manifests[1]["sha256"] = "0" * 64
    (out / "splits.json").write_text(json.dumps(manifests))
    done = _combee("eval", "--split", "val[0:10]", "--playbook", str(out / "final.json"),
                   "--sim-preset", "flat", "--time-scale", "0.0001")
    assert done.returncode == 2 and "val[0:10]" in done.stderr


def test_a_corrupt_playbook_file_is_named(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 2, "bullets": [')
    done = _combee("eval", "--playbook", str(bad))
    assert done.returncode == 2 and str(bad) in done.stderr


def test_demo_prints_the_three_method_table_and_the_path_of_its_report(tmp_path) -> None:
    done = _combee("demo", "--train-limit", "40", "--out", str(tmp_path / "demo"))
    assert done.returncode == 0, done.stderr
    rows = done.stdout.strip().splitlines()
    assert [row.split()[0] for row in rows[-4:-1]] == ["sequential", "naive", "combee"]
    assert rows[-1] == f"report: {tmp_path / 'demo' / 'report.md'}"
    index = (tmp_path / "demo" / "index.md").read_text()
    assert "[report.md](report.md)" in index and "[accuracy-time.png](accuracy-time.png)" in index
    report = (tmp_path / "demo" / "report.md").read_text()
    assert "| proposes edits: curator |" in report and "| serves the prompt: generator |" in report
    assert "scored on the held-out `test` split" in report and "test accuracy % [95% CI]" in report
    assert "## Provenance" in report and "combee demo --train-limit 40" in report
    assert "helpful=" in (tmp_path / "demo" / "prompt.txt").read_text()
    assert (tmp_path / "demo" / "accuracy-time.png").read_bytes()[:4] == b"\x89PNG"


def test_auto_batch_size_plans_every_step_from_measurements_and_logs_why(tmp_path) -> None:
    out = tmp_path / "run"
    done = _combee("learn", "--train-split", "train[0:220]", "--val-split", "val[0:10]", "--batch-size", "auto",
                   "--sim-preset", "h200-70b", "--time-scale", "0.002", "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    decisions = [json.loads(line) for line in (out / "controller.jsonl").read_text().splitlines()]
    assert decisions[0]["reason"].startswith("start: nothing measured yet") and decisions[0]["batch_size"] == 110
    planned = decisions[1]
    assert planned["reason"].startswith(("replan", "hold"))
    assert {"bs_star", "fit_s_per_token", "fit_wait_s_per_inflight", "remaining", "playbook_tokens",
            "reward_mean", "success_lower", "insights", "distinct_insights", "retention"} <= planned["inputs"].keys()
    assert planned["max_group"] == 8 and planned["duplicates"] == 2
    ledger = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    assert sum(row["batch_size"] for row in ledger) == 220


def test_the_papers_profile_and_fit_rule_is_still_available(tmp_path) -> None:
    out = tmp_path / "run"
    config = tmp_path / "paper.toml"
    config.write_text('[controller]\nmode = "paper"\n')
    done = _combee("learn", "--config", str(config), "--train-split", "train[0:220]", "--val-split", "val[0:10]",
                   "--batch-size", "auto", "--sim-preset", "h200-70b", "--time-scale", "0.002", "--out", str(out),
                   "--quiet")
    assert done.returncode == 0, done.stderr
    decisions = [json.loads(line) for line in (out / "controller.jsonl").read_text().splitlines()]
    assert [d["reason"] for d in decisions[:5]] == ["profile"] * 5
    assert [d["batch_size"] for d in decisions[:5]] == [5, 10, 20, 40, 80]
    planned = decisions[5]
    assert planned["reason"].startswith("plan") and {"A", "alpha", "tau", "bs_star"} <= planned["inputs"].keys()
    assert 1 <= planned["batch_size"] <= 96  # the paper's rule is bounded by the preset's 96 sequences


def test_learning_from_collected_traces_sends_no_generator_call(tmp_path) -> None:
    traces = tmp_path / "traces.jsonl"
    lines = []
    for i in range(30):
        wrong = i % 3 == 0
        lines.append(json.dumps({
            "id": f"t{i}", "task": f"Use formula Current Ratio to answer. Question {i}: assets {i + 2}, liabilities 1.",
            "trajectory": "Divided assets by liabilities.", "answer": "0.5" if wrong else f"{i + 2}.00",
            "score": 0.0 if wrong else 1.0, "feedback": "wrong" if wrong else "right", "ground_truth": f"{i + 2}.00",
        }))
    traces.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    done = _combee("learn", "--task", "traces", "--data", str(traces), "--train-split", "all[0:30]",
                   "--val-split", "all[0:0]", "--batch-size", "10", "--sim-preset", "flat",
                   "--time-scale", "0.0001", "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    ledger = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    assert sum(row["calls"].get("reflector", 0) for row in ledger) == 30
    assert all("generator" not in row["calls"] for row in ledger)


def test_learn_against_a_separate_sim_server_process_streamed_or_not(tmp_path) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0", "--world", "formula",
         "--preset", "flat", "--time-scale", "0.0001"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        first = server.stdout.readline().split()
        assert first[:2] == ["listening", "on"], first
        runs = {}
        for mode in ("plain", "stream"):
            out = tmp_path / mode
            done = _combee("learn", "--endpoint", first[2], "--model", "sim", "--train-split", "train[0:20]",
                           "--val-split", "val[0:10]", "--batch-size", "10", "--out", str(out), "--quiet",
                           *(("--stream",) if mode == "stream" else ()))
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout.strip().splitlines()[-1])["bullets"] > 0
            (endpoint,) = json.loads((out / "capabilities.json").read_text())
            assert endpoint["stream"] is (mode == "stream") and endpoint["overloads"] == 0
            runs[mode] = json.loads((out / "final.json").read_text())
        assert runs["stream"] == runs["plain"]  # streamed replies change nothing the run learns
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_run_directory_is_never_mixed_with_a_previous_run(tmp_path) -> None:
    args = ["learn", "--train-split", "train[0:10]", "--val-split", "val[0:5]", "--batch-size", "10",
            "--sim-preset", "flat", "--time-scale", "0.0001", "--out", str(tmp_path / "r"), "--quiet"]
    ledger = tmp_path / "r" / "ledger.jsonl"

    def rows() -> list[dict]:
        return [{k: v for k, v in json.loads(line).items() if k not in ("wall_seconds", "gpu_seconds", "concurrency")}
                for line in ledger.read_text().splitlines()]

    assert _combee(*args).returncode == 0
    first = rows()
    again = _combee(*args)
    assert again.returncode == 2 and "--overwrite" in again.stderr and again.stderr.count("\n") == 1
    assert _combee(*args, "--overwrite").returncode == 0
    assert rows() == first  # the same seed gives the same ledger (but the measured times and calls in flight), once


def test_a_role_without_an_endpoint_never_falls_back_to_the_simulator() -> None:
    done = _combee("learn", "--role-endpoint", "generator=http://127.0.0.1:9/v1", "--role-model", "generator=m")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "reflector" in done.stderr and "--role-endpoint reflector=URL" in done.stderr


def test_an_endpoint_for_a_role_the_learner_does_not_call_is_refused_in_one_line() -> None:
    done = _combee("learn", "--learner", "gepa", "--method", "gepa", "--role-endpoint", "curator=http://127.0.0.1:9/v1")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "endpoints for unknown roles: curator" in done.stderr and "solver, proposer, aggregator" in done.stderr


def test_local_refuses_a_default_endpoint_in_one_line(tmp_path) -> None:
    done = _combee("learn", "--local", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and not (tmp_path / "r").exists()
    assert done.stderr.strip().splitlines()[-1].endswith(
        "--local is the endpoint of every role without its own: give no --endpoint/--model with it "
        "(--role-endpoint ROLE=URL is fine)")
