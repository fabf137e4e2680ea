"""``bench/peers.py`` at tiny scale, so a change that breaks the peers bench fails here.

Our peers always run; the PyPI ``gepa`` rows run when the package (the ``bench`` extra) is
installed and otherwise must say why they could not, and the GEPA-package assertions are then
skipped with that reason. So do TurboGEPA and AgentDescent (the peers of 2026, also in the extra).
"""

from __future__ import annotations

import re

import pytest

from tests.bench_scripts import load_bench

LAST_LINE = re.compile(
    r"gepa_pypi_s_per_call=(\S+) gepa_ours_s_per_call=(\S+) combee_gepa_s_per_call=(\S+) "
    r"combee_ace_s_per_sample=(\S+) sequential_ace_s_per_sample=(\S+) textgrad_pypi_s_per_sample=(\S+) "
    r"textgrad_ours_s_per_sample=(\S+) combee_textgrad_s_per_sample=(\S+) mipro_s_per_metric_call=(\S+) "
    r"async_gepa_s_per_call=(\S+) async_gepa_overshoot=(\S+) "
    r"(turbo_gepa_s=\S+ turbo_gepa_test=\S+|turbo_gepa_skipped=\S+ turbo_gepa_test=nan) tokens_per_improvement_turbo_gepa=\S+ "
    r"(agentdescent_s=\S+ agentdescent_test=\S+|agentdescent_skipped=\S+ agentdescent_test=nan) "
    r"tokens_per_improvement_agentdescent=\S+ async_gepa_to_best_s=\S+ async_gepa_test=(\S+) "
    r"tokens_per_improvement_async_gepa=(\S+) best_peer_test=\S+ async_gepa_s_to_best_peer_test=\S+ "
    r"async_gepa_first_to_best_peer_test=(0|1|nan) async_gepa_fewer_tokens_per_improvement_than_turbo=(0|1|nan)"
)


@pytest.mark.slow
async def test_peers_bench_runs_at_tiny_scale() -> None:
    bench = load_bench("peers")
    args = bench.PeersArgs(train=6, val=4, budget=24, combee_batch=4, ace_batch=3, time_scale=0.005, test=8)
    trajectory: list[tuple[float, float]] = []
    rows = await bench.run_peers(args, trajectory)
    by = {row.name: row for row in rows}
    assert list(by)[:8] == ["gepa (PyPI)", "gepa (PyPI) + Combee refl.", "gepa (ours)", "gepa (ours, 1 in flight)",
                            "combee-gepa", "async-gepa", "sequential ACE", "combee ACE"]
    ace = rows[8]
    assert ace.name.startswith("ACE (ace-framework")
    if bench.ace_framework_version() is None:
        assert ace.reason.startswith("cannot run: ace-framework is not installed")
    else:
        assert ace.reason is None and ace.samples == args.train and ace.peak == 1 and ace.depth == ace.calls
    for name in ("gepa (ours)", "gepa (ours, 1 in flight)", "combee-gepa", "async-gepa", "sequential ACE", "combee ACE"):
        row = by[name]
        assert row.reason is None and row.samples > 0 and row.calls > 0 and row.depth > 0, name
    serial = by["gepa (ours, 1 in flight)"]
    assert serial.peak == 1 and serial.depth == serial.calls  # one request at a time: depth is the call count
    assert by["sequential ACE"].peak == 1
    assert by["combee-gepa"].peak > 1 and by["combee ACE"].peak > 1
    assert bench.table(rows)[0].startswith("peer")
    match = LAST_LINE.fullmatch(bench.last_line(rows, args.budget, trajectory))
    assert match is not None
    assert all(value != "nan" for value in match.groups()[1:5] + match.groups()[6:8] + match.groups()[9:11])
    bench.check_figures(rows, args.budget)  # nothing impossible
    _check_the_cost_columns(bench, rows, args, trajectory)
    missing = _check_the_peers_of_2026(bench, rows, args)
    assert by["async-gepa"].metric_calls <= args.budget and match.group(11) == "0"  # reserved at dispatch
    assert by["async-gepa"].peak > 1
    _check_the_prompt_peers(bench, rows, args, match)
    if not bench.gepa_pypi_available():
        assert by["gepa (PyPI)"].reason.startswith("cannot run: the gepa package is not installed")
        missing.insert(0, "the PyPI gepa package")
    else:
        pypi = by["gepa (PyPI)"]
        assert pypi.reason is None and pypi.metric_calls >= args.budget and pypi.iterations > 0
        assert pypi.peak == 1 and pypi.depth == pypi.calls  # its default adapter grades one example at a time
        assert by["gepa (PyPI) + Combee refl."].peak > 1  # the interop's map: several reflections at once
        assert match.group(1) != "nan"
        assert any(line.startswith("faithfulness gepa (ours, 1 in flight)") for line in bench.faithfulness(rows, args.val))
    if missing:
        pytest.skip(f"not installed (pip install -e '.[bench]'): {', '.join(missing)}; their rows say so, their "
                    "checks were skipped")


def _check_the_prompt_peers(bench, rows, args, match) -> None:
    """The TextGrad and MIPROv2 rows: ours always run; the PyPI textgrad and DSPy run when the
    bench extra is installed (both are in it), else they say why."""
    first = next(i for i, row in enumerate(rows) if row.name.startswith("textgrad ("))  # the PyPI row leads them
    names = [row.name for row in rows[first:]]
    assert names[1:3] == ["textgrad (ours, 1 in flight)", "combee-textgrad"]
    by = {row.name: row for row in rows[first:]}
    serial, combee = by["textgrad (ours, 1 in flight)"], by["combee-textgrad"]
    assert serial.peak == 1 and serial.depth == serial.calls == 4 * args.train and serial.samples == args.train
    assert serial.sim_seconds > serial.calls  # the world answers our roles (replies of some 100 tokens on flat)
    assert combee.peak > 1 and combee.depth < combee.calls and combee.sim_seconds < serial.sim_seconds
    pypi, mipro = rows[first], rows[first + 3]
    if not bench.textgrad_pypi_available():
        assert pypi.reason.startswith("cannot run: the textgrad package is not installed")
    else:
        assert pypi.name.startswith("textgrad (PyPI 0.1.8") and pypi.reason is None
        assert pypi.peak == 1 and pypi.depth == pypi.calls == 5 * args.train  # forward, loss, 2 backward, step
        assert match.group(6) != "nan"
    if bench.mipro_missing() is not None:
        assert mipro.reason == f"cannot run: {bench.mipro_missing()}"
    else:
        assert mipro.name.startswith("MIPROv2 (DSPy 3.4") and mipro.reason is None
        assert mipro.calls > mipro.depth > 0 and mipro.metric_calls > 0 and mipro.sim_seconds > 0
        assert match.group(9) != "nan"


def _check_the_cost_columns(bench, rows, args, trajectory) -> None:
    """async-gepa and Combee ACE (ours) have every column of the cost table; async-gepa's pool
    was scored candidate by candidate (its trajectory) for the race."""
    by = {row.name: row for row in rows}
    for name in ("async-gepa", "combee ACE"):
        row = by[name]
        assert row.tokens > 0 and row.explored is not None and row.accepted is not None, name
        assert 0.0 <= row.test_accuracy <= 1.0 and row.to_best_s is not None and row.to_best_s >= 0, name
    assert len(trajectory) >= 1  # the seed at least
    assert all(0.0 <= accuracy <= 1.0 for _, accuracy in trajectory)
    assert any(line.startswith("peer") and "tokens/acc." in line for line in bench.cost_table(rows))


def _check_the_peers_of_2026(bench, rows, args) -> list[str]:
    """TurboGEPA and AgentDescent: the last two rows; run when installed (every column), else a
    row saying why; the packages not installed are returned (the test is then skipped, saying so)."""
    turbo, agentdescent = rows[-2], rows[-1]
    assert turbo.name.startswith("TurboGEPA (turbo-gepa") and agentdescent.name.startswith("AgentDescent (agentdescent")
    missing = []
    for row, version, package in ((turbo, bench.turbo_gepa_version(), "turbo-gepa"),
                                  (agentdescent, bench.agentdescent_version(), "agentdescent")):
        if version is None:
            assert row.reason.startswith(f"cannot run: {package} is not installed")
            missing.append(package)
            continue
        assert row.reason is None and row.calls > 0 and row.tokens > 0 and row.sim_seconds > 0, row.name
        assert row.metric_calls >= args.budget, row.name  # each stops once the budget is spent, not before
        assert 0 <= row.accepted <= row.explored and 0.0 <= row.test_accuracy <= 1.0, row.name
        assert row.to_best_s is not None and 0 <= row.to_best_s <= row.sim_seconds, row.name
    if not missing:
        assert turbo.peak > 1  # its evaluations run concurrently
        assert 1 < agentdescent.peak <= bench.AGENTDESCENT_WORKERS  # its workers, no more
    return missing
