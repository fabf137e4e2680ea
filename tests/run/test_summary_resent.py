"""``summary.json`` says how many requests were sent once more on a new connection after their
reused keep-alive connection closed unanswered (``resent``): not retries, and until now counted
nowhere a user could read. Against the in-process simulated server dropping a share of its
connections before answering: every request it received is a call, a retried attempt or a resend."""

from __future__ import annotations

import json
from pathlib import Path

from combee_fast import flags
from combee_fast.cli import build_parser
from combee_fast.session import open_session


def _attempts(counts: dict) -> int:
    return sum(counts["calls"].values()) + sum(n for kinds in counts["retries"].values() for n in kinds.values())


async def test_the_summary_counts_the_requests_sent_again_on_a_new_connection(tmp_path: Path) -> None:
    args = build_parser().parse_args(["learn", "--train-split", "train[0:20]", "--val-split", "val[0:5]",
                                      "--batch-size", "10", "--sim-preset", "flat", "--time-scale", "0.0001",
                                      "--fault-drop", "0.2", "--seed", "3"])
    out = tmp_path / "run"
    async with open_session(flags.session_config(args)) as session:
        result = await session.train(out=out)
        received = session.server.counters().requests
        resent = sum(client.resent for client in session.clients.every_replica())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resent"] == result.resent == resent > 0
    accounted = sum(_attempts(summary["accounting"][scope]) for scope in ("train", "validation"))
    assert received == accounted + summary["resent"]
