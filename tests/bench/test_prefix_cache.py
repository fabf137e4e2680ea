"""``bench/prefix_cache.py`` against the real local llama.cpp server (the ``local`` extra): four
waves of requests sharing a role's system prompt, and what the server's prompt cache spared each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.local_models import LOCAL_MODEL_MARKS, THREADS

pytestmark = LOCAL_MODEL_MARKS

ROOT = Path(__file__).resolve().parents[2]
KEYS = ["cold_cached", "cold_read", "switch_cached", "switch_read", "back_cached", "back_read", "warm_cached",
        "warm_read", "prompt_tokens", "slots"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "prefix_cache.py"), *args],
                          capture_output=True, text=True, timeout=900)


def test_each_wave_says_how_many_of_its_requests_found_the_system_prompt() -> None:
    done = _run("--slots", "2", "--threads", str(THREADS))
    assert done.returncode == 0, done.stderr
    pairs = [pair.split("=") for pair in done.stdout.strip().splitlines()[-1].split()]
    assert [key for key, _ in pairs] == KEYS
    figures = {key: int(value) for key, value in pairs}
    assert figures["slots"] == 2 and 300 < figures["prompt_tokens"] < 800  # the generator's system prompt
    for wave in ("cold", "switch", "back", "warm"):
        assert 0 <= figures[f"{wave}_cached"] <= 2 and figures[f"{wave}_read"] > 0
    # a role no slot has run yet: at least one request of its wave reads the whole system prompt
    assert figures["switch_cached"] < 2 and figures["switch_read"] >= figures["prompt_tokens"]


def test_a_wave_of_one_request_is_refused_in_one_line() -> None:
    done = _run("--slots", "1")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--slots must be at least 2" in done.stderr
