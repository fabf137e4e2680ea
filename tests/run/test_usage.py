"""The usage record beside a card: appended whole, by concurrent processes, never half-written."""

from __future__ import annotations

import subprocess
import sys

from combee_fast.record.usage import append_usage, read_usage, usage_entry, usage_path
from combee_fast.tasks.formula import FormulaTask

_APPEND = """
import sys
from combee_fast.record.usage import append_usage, usage_entry
from combee_fast.tasks.base import SplitManifest
manifest = SplitManifest("formula", "selection", "f.jsonl", 200, "ab" * 32)
for i in range(int(sys.argv[3])):
    append_usage(sys.argv[1], [usage_entry(manifest, role="selection", use="select", run=f"{sys.argv[2]}-{i}", command="learn"),
                               usage_entry(manifest, role="selection", use="tune", run=f"{sys.argv[2]}-{i}", command="learn")])
"""


def test_the_record_lives_in_the_state_directory_not_beside_the_card_and_round_trips(tmp_path, monkeypatch):
    monkeypatch.setenv("COMBEE_STATE_DIR", str(tmp_path / "state"))
    record = usage_path(tmp_path / "cards" / "formula.toml")
    assert record.parent == tmp_path / "state" / "usage" and record.name.startswith("formula-")
    assert usage_path(tmp_path / "other" / "formula.toml") != record  # one record per card file
    assert not (tmp_path / "cards").exists()
    assert read_usage(record) == []
    manifest = FormulaTask().load("test[0:10]").manifest
    entry = usage_entry(manifest, role="test", use="report", run="runs/a", command="eval")
    append_usage(record, [entry])
    append_usage(record, [entry, entry])
    assert read_usage(record) == [entry] * 3
    assert entry.split == "test[0:10]" and entry.sha256 == manifest.sha256 and entry.time.endswith("Z")


def test_concurrent_processes_lose_no_entry(tmp_path):
    record = tmp_path / "card.usage.json"
    workers = [subprocess.Popen([sys.executable, "-c", _APPEND, str(record), f"p{n}", "15"]) for n in range(4)]
    assert [w.wait(timeout=120) for w in workers] == [0] * 4
    entries = read_usage(record)
    assert len(entries) == 4 * 15 * 2
    runs = [e.run for e in entries]
    for n in range(4):  # each process's appends are whole and in its own order
        mine = [r for r in runs if r.startswith(f"p{n}-")]
        assert mine == [f"p{n}-{i}" for i in range(15) for _ in range(2)]
    assert not list(tmp_path.glob(".*.tmp"))
