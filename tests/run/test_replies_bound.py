"""replies.jsonl keeps every reply of a run up to its bound, then closes with one line saying so:
a run folder does not grow without limit however long the run (issue 52)."""

from __future__ import annotations

import json

from combee_fast.config import SessionConfig
from combee_fast.engine.events import REPLY_KEPT, CallReplied
from combee_fast.record.rundir import REPLIES_KEPT_BYTES, RunDir
from combee_fast.run.recorder import RunRecord


def test_replies_stop_at_the_bound_with_one_closing_line_and_one_notice(tmp_path, capsys) -> None:
    run_dir = RunDir(tmp_path / "run")
    run_dir.write_config(SessionConfig())
    run_dir.start()
    record = RunRecord(run_dir)
    longest = "x" * (2 * REPLY_KEPT)  # cut to REPLY_KEPT characters
    offered = REPLIES_KEPT_BYTES // REPLY_KEPT + 50
    for _ in range(offered):
        record(CallReplied.of("generator", longest, ""))
    run_dir.close()
    path = tmp_path / "run" / "replies.jsonl"
    assert REPLIES_KEPT_BYTES <= path.stat().st_size < REPLIES_KEPT_BYTES + REPLY_KEPT + 200
    with path.open() as lines:
        rows = [json.loads(line) for line in lines]
    *kept, closing = rows
    assert 0 < len(kept) < offered and all(r["role"] == "generator" and r["cut"] for r in kept)
    assert closing["bound"] == REPLIES_KEPT_BYTES and "later replies are not kept" in closing["closed"]
    notices = [line for line in capsys.readouterr().err.splitlines() if "replies.jsonl" in line]
    assert len(notices) == 1 and "reached its bound of 64 MiB" in notices[0]
