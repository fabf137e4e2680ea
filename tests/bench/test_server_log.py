"""``bench/server_log.py`` on the log of a real llama.cpp server: the Combee run of
``bench/real_model.py`` (``--out /tmp/c49/real1``, 2026-12-07, 4 slots), kept in
``tests/data/llamacpp-combee-server.log``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.bench_scripts import load_bench

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "data" / "llamacpp-combee-server.log"
server_log = load_bench("server_log")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "server_log.py"), *args],
                          capture_output=True, text=True, timeout=60)


def test_each_task_says_its_slot_how_it_was_chosen_and_what_it_read() -> None:
    tasks = server_log.read_log(LOG)
    assert len(tasks) == 39 and len({t.slot for t in tasks}) == 4
    first_reflector = next(t for t in tasks if t.task == 529)  # the map's first reflector on slot 1: cold
    assert (first_reflector.slot, first_reflector.chosen, first_reflector.read, first_reflector.generated) == \
        (1, "LRU", 896, 189)
    cut = next(t for t in tasks if t.task == 1293)  # a curator the client cut: no timings printed
    assert cut.read is None and cut.generated is None and cut.ended is not None
    assert [t.started for t in tasks] == sorted(t.started for t in tasks)
    busy, span = server_log.mean_busy(tasks)
    assert 3.2 < busy < 3.35 and 290 < span < 295


def test_the_last_line_is_key_value_pairs_of_the_totals() -> None:
    done = _run(str(LOG), "--tasks")
    assert done.returncode == 0, done.stderr
    last = dict(pair.split("=") for pair in done.stdout.strip().splitlines()[-1].split())
    assert last == {"tasks": "39", "read": "14332", "generated": "5565", "lru": "16", "mean_busy": "3.28",
                    "span_s": "293"}
    assert "| 529 | 1 | LRU |" in done.stdout


def test_a_missing_log_or_one_without_tasks_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = _run(str(tmp_path / "nope.log"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no file" in missing.stderr
    empty = tmp_path / "server.log"
    empty.write_text("llama_host: serving\n")
    none = _run(str(empty))
    assert none.returncode == 2 and none.stderr.count("\n") == 1 and "no llama.cpp task" in none.stderr
