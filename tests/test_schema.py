import msgspec

from combee_fast.schema import Usage
from combee_fast.ace.records import Delta, Op, OpKind
from combee_fast.tokens import estimate_tokens


def test_delta_round_trips_through_json():
    delta = Delta(ops=(Op(OpKind.ADD, section="formulas", content="ROI = gain / cost"),), source="curator[0]")
    assert msgspec.json.decode(msgspec.json.encode(delta), type=Delta) == delta


def test_effective_latency_prefers_simulated_seconds():
    assert Usage(latency_s=0.01, sim_latency_s=2.5).effective_latency_s == 2.5
    assert Usage(latency_s=0.01).effective_latency_s == 0.01


def test_token_estimate_rounds_up():
    assert [estimate_tokens(s) for s in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]
