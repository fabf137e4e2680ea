"""The bench smoke: every figure command (``bench/*.py`` printing ``key=value`` as its last line)
in its smallest size, checked for its invariants and the shape of its last line, never its targets.

A default that moves under a bench (the sim-server's time scale, say) then fails here, in CI:
either the bench's own physics check refuses (:mod:`physics`, a non-zero exit) or an invariant
breaks. The commands run a few at a time (:data:`AT_ONCE`: most of them wait on simulated time,
not on a core), all started by the first test that needs one; each test waits for its own.
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.worker_groups import RAY

pytestmark = RAY  # ray_scaling.py starts a Ray cluster; one fixture starts every command

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
AT_ONCE = 4
"""Figure commands run at once."""
TIMEOUT_S = 240.0

Check = Callable[[dict[str, str]], None]


def _numbers(figures: dict[str, str], *keys: str) -> list[float]:
    return [float(figures[key]) for key in keys]


def _share(*keys: str) -> Check:
    """Each of ``keys`` is a number in [0, 1]."""
    def check(figures: dict[str, str]) -> None:
        for key, value in zip(keys, _numbers(figures, *keys)):
            assert 0.0 <= value <= 1.0, f"{key}={value} is not in [0, 1]"
    return check


def _positive(*keys: str) -> Check:
    def check(figures: dict[str, str]) -> None:
        for key, value in zip(keys, _numbers(figures, *keys)):
            assert value > 0 and math.isfinite(value), f"{key}={value} is not a positive number"
    return check


def _at_least_zero(*keys: str) -> Check:
    def check(figures: dict[str, str]) -> None:
        for key, value in zip(keys, _numbers(figures, *keys)):
            assert value >= 0, f"{key}={value} is negative (or not a number)"
    return check


def _points(*keys: str) -> Check:
    """Accuracies in points, [0, 100]."""
    def check(figures: dict[str, str]) -> None:
        for key, value in zip(keys, _numbers(figures, *keys)):
            assert 0.0 <= value <= 100.0, f"{key}={value} is not in [0, 100]"
    return check


def _exactly(**expected: str) -> Check:
    def check(figures: dict[str, str]) -> None:
        for key, value in expected.items():
            assert figures[key] == value, f"{key}={figures[key]}, the invariant is {value}"
    return check


def _share_or_nan(*keys: str) -> Check:
    """Each of ``keys`` is a number in [0, 1], or nan (not measured: a peer not installed)."""
    def check(figures: dict[str, str]) -> None:
        for key in keys:
            value = float(figures[key])
            assert value != value or 0.0 <= value <= 1.0, f"{key}={value} is not in [0, 1] (nor nan)"
    return check


def _one_of(key: str, *words: str) -> Check:
    def check(figures: dict[str, str]) -> None:
        assert figures[key] in words, f"{key}={figures[key]} is not one of {words}"
    return check


class Figure:
    """One figure command: its smallest ``args``, the ``keys`` of its last line (in order; ``a|b``:
    either, e.g. a figure or the reason it was skipped) and the ``checks`` of its invariants;
    ``needs``: a module it cannot run without (skipped then); ``name``: the test's (the script's
    stem unless one script has two figure commands)."""

    def __init__(self, script: str, args: list[str], keys: str, *checks: Check, needs: str | None = None,
                 name: str | None = None) -> None:
        self.script, self.args, self.keys, self.checks, self.needs = script, args, keys.split(), checks, needs
        self.name = name or script.removesuffix(".py")

    def argv(self) -> list[str]:
        return [sys.executable, str(BENCH / self.script), *self.args]


# Sizes: each command's smallest that keeps its own checks meaningful: faults.py learns from 280
# examples (7 steps: with 3, two truncated reducer replies of three stop the faulty run), and
# ray_scaling.py runs 2 episodes per node with 1 s tool waits (with 1 episode and 0.2 s waits one
# node's rate was noise, and the efficiency came out 1.135: refused, as it should be).
FIGURES = {f.name: f for f in [
    Figure("faults.py", ["--train-split", "train[0:280]", "--val-split", "selection[0:40]", "--corruptions", "2",
                         "--seed", "1"],
           "lost_rollouts unaccounted_calls resume_identical concurrent_resume_refused corrupt_checkpoints_loaded "
           "corruptions acc_clean acc_faults",
           _exactly(lost_rollouts="0", unaccounted_calls="0", resume_identical="1", concurrent_resume_refused="1",
                    corrupt_checkpoints_loaded="0", corruptions="2"), _share("acc_clean", "acc_faults")),
    Figure("ray_scaling.py", ["--nodes", "1", "2", "--per-node", "2", "--waves", "1", "--serial", "1",
                              "--tool-wait", "1.0"],  # the waits dominate: one node's rate is not noise
           "efficiency_2 overhead_ms lost_rollouts identical",
           _share("efficiency_2"), _exactly(lost_rollouts="0", identical="1"), needs="ray"),
    Figure("verify.py", ["--card", "{tmp}/card.toml", "--out", "{tmp}/verify", "--cache", "{tmp}/verify-cache"],
           "verdict_combee verdict_naive min_speedup max_quality_drop bootstrap_ms",
           _one_of("verdict_combee", "PASS", "FAIL"), _one_of("verdict_naive", "PASS", "FAIL"),
           _positive("min_speedup"), _at_least_zero("bootstrap_ms")),
    Figure("controller.py", ["--presets", "flat", "--seeds", "0", "--sizes", "40"],
           "auto_time_vs_best auto_acc_gap auto_speedup_min", _positive("auto_speedup_min")),
    Figure("agents.py", [],
           "speedup acc_sequential acc_combee acc_naive sandbox_overhead_ms rollouts_per_s sandbox_cold_ms",
           _positive("speedup", "rollouts_per_s"), _points("acc_sequential", "acc_combee", "acc_naive")),
    Figure("real_agent.py", ["--sim", "--out", "{tmp}/real_agent"],
           "success_before success_after episodes s_per_episode wall_s families slots lessons model load_avg "
           "failures_before failures_after",
           _share("success_before", "success_after"), _exactly(episodes="6", families="2", model="simulated"),
           _positive("s_per_episode")),
    Figure("gepa_speedup.py", ["--budget", "120", "--val-split", "selection[0:20]"],  # the budget pays for a step
           "async_vs_serial async_vs_sync acc_gap overshoot auto_batch serial_s sync_s async_s serial_test "
           "sync_test async_test budget async_calls sync_overshoot",
           _positive("async_vs_serial", "async_vs_sync", "serial_s", "sync_s", "async_s"),
           _share("serial_test", "sync_test", "async_test"), _at_least_zero("overshoot", "sync_overshoot")),
    Figure("speedup.py", ["--preset", "flat"], "speedup acc_sequential acc_combee acc_naive100",
           _positive("speedup"), _points("acc_sequential", "acc_combee", "acc_naive100")),
    Figure("textgrad.py", ["--preset", "flat"],
           "speedup acc_serial acc_combee acc_naive sim_s_serial sim_s_combee sim_s_naive",
           _positive("speedup", "sim_s_serial", "sim_s_combee", "sim_s_naive"),
           _points("acc_serial", "acc_combee", "acc_naive")),
    Figure("kernels.py", ["--fraction", "0.05"], "scan_speedup scan_mops prefix_mops var_vs_numpy sim_peak_mib",
           _positive("scan_speedup", "scan_mops", "prefix_mops", "var_vs_numpy", "sim_peak_mib")),
    Figure("bootstrap.py", ["--resamples", "200", "--examples", "30"],
           "bootstrap_ms bootstrap_1t_ms reference_s speedup", _at_least_zero("bootstrap_ms", "reference_s")),
    Figure("calibrate_world.py", [],
           "entries_b1 entries_b5 entries_b10 entries_b20 entries_b50 entries_b100 max_rel_error",
           _at_least_zero("entries_b1", "entries_b100", "max_rel_error")),
    Figure("peers.py", ["--train", "6", "--val", "4", "--budget", "50", "--test", "10"],
           "gepa_pypi_s_per_call gepa_ours_s_per_call combee_gepa_s_per_call combee_ace_s_per_sample "
           "sequential_ace_s_per_sample textgrad_pypi_s_per_sample textgrad_ours_s_per_sample "
           "combee_textgrad_s_per_sample mipro_s_per_metric_call async_gepa_s_per_call async_gepa_overshoot "
           "turbo_gepa_s|turbo_gepa_skipped turbo_gepa_test tokens_per_improvement_turbo_gepa "
           "agentdescent_s|agentdescent_skipped agentdescent_test tokens_per_improvement_agentdescent "
           "async_gepa_to_best_s async_gepa_test tokens_per_improvement_async_gepa best_peer_test "
           "async_gepa_s_to_best_peer_test async_gepa_first_to_best_peer_test "
           "async_gepa_fewer_tokens_per_improvement_than_turbo",
           _positive("gepa_ours_s_per_call", "combee_gepa_s_per_call", "async_gepa_s_per_call"),
           _exactly(async_gepa_overshoot="0"), _share_or_nan("turbo_gepa_test", "agentdescent_test", "best_peer_test"),
           _share("async_gepa_test"), _one_of("async_gepa_first_to_best_peer_test", "0", "1", "nan"),
           _one_of("async_gepa_fewer_tokens_per_improvement_than_turbo", "0", "1", "nan")),
    Figure("optimize.py", ["--budget", "100", "--train", "12", "--val", "10", "--latency", "0.01"],
           "optimize_speedup gepa_s combee_s latency_ms concurrency gepa_val combee_val gepa_metric_calls "
           "combee_metric_calls slot_use",
           _positive("optimize_speedup", "gepa_s", "combee_s"), _share("gepa_val", "combee_val", "slot_use"),
           _exactly(latency_ms="10", concurrency="8"), needs="gepa"),
    Figure("abandoned.py", ["--repeats", "1", "--max-tokens", "60", "--settle", "0"],
           "next_wait_streamed_s next_wait_plain_s ratio server", _at_least_zero("next_wait_streamed_s"),
           needs="xllamacpp"),
    Figure("canary.py", ["--seeds", "1", "--requests", "200", "--users", "20", "--workers", "1"],
           "exposure false_rollback detect_rollouts shadow_exposure shadow_cost exposure_none exposure_shadow "
           "exposure_any exposure_any_none false_rollback_shadow detect_pairs_shadow accuracy_staged accuracy_shadow accuracy_none accuracy_ratio "
           "wrong_served_staged wrong_served_shadow wrong_served_none rollbacks promotions seeds requests margin "
           "wall_s load learner lowering_versions",
           _share("exposure", "false_rollback", "exposure_none", "exposure_any", "exposure_any_none", "accuracy_staged",
                  "accuracy_none"),
           _exactly(seeds="1", requests="200", learner="ace")),
    Figure("loop_lag.py", ["--rollouts", "64", "--modes", "inloop", "--idle-seconds", "0.5"],
           "inloop_lag_p99_ms inloop_lag_max_ms inloop_read_p99_us inloop_submit_p99_us inloop_gc_max_ms "
           "server_priority", _at_least_zero("inloop_lag_p99_ms", "inloop_submit_p99_us")),
    Figure("loop_profile.py", ["--rollouts", "64"],
           "host_cpu_ms wall_ms off_thread_cpu_ms gc_ms gc_max_ms decode_ms encode_ms http_ms parse_ms prompts_ms "
           "client_ms learner_ms scheduling_ms bench_ms other_ms", _positive("wall_ms")),
    Figure("online_memory.py", ["--rollouts", "400", "--every", "100"],
           "rss_mb_first rss_mb_half rss_mb_end rss_growth_second_half_mb objects_growth_second_half batches_kept "
           "bullets", _positive("rss_mb_first", "rss_mb_end")),
    Figure("real_model.py", ["--sim", "--train", "20", "--test", "20", "--out", "{tmp}/real-model"],
           "real_speedup batching_gain workload_gain utilization best_concurrency predicted_vs_measured "
           "acc_sequential acc_sequential_lo acc_sequential_hi acc_naive acc_naive_lo acc_naive_hi acc_combee "
           "acc_combee_lo acc_combee_hi s_sequential s_naive s_combee tokens_sequential tokens_naive tokens_combee "
           "cached_share_sequential cached_share_naive cached_share_combee retention_sequential retention_naive "
           "retention_combee real_speedup_limit real_gepa_speedup real_gepa_token_rate s_gepa s_async_gepa metric_calls_gepa "
           "metric_calls_async_gepa val_gepa val_async_gepa utilization_ceiling prefill_share cached_share train test "
           "load_start load_end",
           _positive("real_speedup", "batching_gain", "workload_gain", "predicted_vs_measured", "tokens_combee"),
           _share("utilization", "utilization_ceiling"), _exactly(train="20", test="20"),
           # the simulated server counts no work of its own (no /metrics)
           _exactly(prefill_share="nan", cached_share="nan", cached_share_sequential="nan", cached_share_naive="nan",
                    cached_share_combee="nan"),
           _share("retention_sequential", "retention_naive", "retention_combee"),
           _positive("real_speedup_limit", "real_gepa_speedup", "real_gepa_token_rate", "metric_calls_gepa", "metric_calls_async_gepa"),
           _points("acc_sequential", "acc_sequential_lo", "acc_sequential_hi", "acc_naive", "acc_combee")),
    Figure("real_model.py", ["--sim", "--gepa-only", "--out", "{tmp}/real-model-gepa"],
           "real_gepa_speedup real_gepa_token_rate s_gepa s_async_gepa metric_calls_gepa metric_calls_async_gepa "
           "val_gepa val_async_gepa load_start load_end",
           _positive("real_gepa_speedup", "real_gepa_token_rate", "metric_calls_gepa", "metric_calls_async_gepa"),
           name="real_model_gepa"),
    Figure("throughput.py", ["--concurrency", "16", "--latency", "0.2", "--seconds", "1", "--warmup", "0.5"],
           "throughput_ratio httpx_default_ratio cpu_us_per_request server_cpu_us_per_request server_processes "
           "single_request_ms bottleneck load1",
           _share("throughput_ratio", "httpx_default_ratio"), _positive("cpu_us_per_request", "single_request_ms"),
           _one_of("bottleneck", "none", "sim-server", "client", "machine")),
]}


def last_line_figures(done: subprocess.CompletedProcess[str], figure: Figure) -> dict[str, str]:
    """The figures of ``done``'s last line, checked: exit 0, exactly ``figure.keys`` in order, each
    ``key=value``; then its invariants. AssertionError naming the command and what broke."""
    name = figure.script
    assert done.returncode == 0, f"{name} exited {done.returncode}: {done.stderr.strip()[-600:]}"
    lines = done.stdout.strip().splitlines()
    assert lines, f"{name} printed nothing"
    pairs = [token.partition("=") for token in lines[-1].split()]
    assert all(sep == "=" and key and value for key, sep, value in pairs), f"{name}: last line not key=value: {lines[-1]}"
    keys = [key for key, _, _ in pairs]
    assert len(keys) == len(figure.keys) and all(key in expected.split("|") for key, expected in zip(keys, figure.keys)), \
        f"{name}: last line's keys {keys}"
    figures = {key: value for key, _, value in pairs}
    for check in figure.checks:
        check(figures)
    return figures


def one_hardware_card(folder: Path) -> Path:
    """The Formula card with its first hardware class only (verify's smallest size), in ``folder``."""
    text = (ROOT / "cards" / "formula.toml").read_text()
    second, after = text.index("[[hardware]]", text.index("[[hardware]]") + 1), text.index("[budget]")
    path = folder / "card.toml"
    path.write_text(text[:second] + text[after:])
    return path


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def _selected(request: pytest.FixtureRequest) -> set[str]:
    """The figure commands whose tests this session runs (``-k`` may select a few)."""
    return {item.callspec.params["name"] for item in request.session.items
            if getattr(item, "originalname", None) == "test_figure_command" and item.module is sys.modules[__name__]}


@pytest.fixture(scope="module")
def started(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """Every runnable figure command this session tests, started (longest first) :data:`AT_ONCE` at a time."""
    folder = tmp_path_factory.mktemp("bench-smoke")
    one_hardware_card(folder)
    began, selected = time.perf_counter(), _selected(request)
    with ThreadPoolExecutor(AT_ONCE) as pool:
        futures = {name: pool.submit(_run, [a.replace("{tmp}", str(folder)) for a in f.argv()], ROOT)
                   for name, f in FIGURES.items()
                   if name in selected and (f.needs is None or importlib.util.find_spec(f.needs))}
        yield futures
    print(f"\nbench smoke: {time.perf_counter() - began:.0f} s, load {os.getloadavg()[0]:.2f}")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FIGURES))
def test_figure_command(started: dict[str, Future[subprocess.CompletedProcess[str]]], name: str) -> None:
    if name not in started:
        pytest.skip(f"{FIGURES[name].script} needs {FIGURES[name].needs}, not installed")
    last_line_figures(started[name].result(), FIGURES[name])


@pytest.mark.slow
def test_the_smoke_fails_when_a_bench_server_default_moves() -> None:
    """throughput.py with its servers' time scale moved back to learn's (0.01, as it once moved
    under it): the bench refuses, so the smoke fails (it printed 5.5x its limit before)."""
    figure = FIGURES["throughput"]
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import throughput; throughput.SERVER_TIME_SCALE = 0.01; "
            "sys.exit(throughput.main(sys.argv[2:]))")
    done = _run([sys.executable, "-c", code, str(BENCH), *figure.args], ROOT)
    with pytest.raises(AssertionError, match="throughput.py exited 6: .*refused: .*sooner than the 200.0 ms"):
        last_line_figures(done, figure)
