"""Cost of apply on large playbooks: thousands of TAG ops must stay O(ops + bullets).

``python -m pytest bench/test_playbook_apply.py`` prints the timings; timing checks live here, not
in the unit suite, because a busy machine makes them flaky.
"""

from __future__ import annotations

import gc
import random
import time

from combee_fast.ace.playbook import Playbook
from combee_fast.ace.records import Delta, Op, OpKind

SECTIONS = ("strategies_and_hard_rules", "formulas_and_calculations", "common_mistakes")


def filled(n: int, token_budget: int | None = None) -> Playbook:
    ops = tuple(
        Op(OpKind.ADD, section=SECTIONS[i % 3], content=f"insight {i}: check the units before dividing")
        for i in range(n)
    )
    playbook, report = Playbook.empty(token_budget=token_budget).apply(Delta(ops=ops))
    assert len(report.added_ids) == n
    return playbook


def tag_delta(playbook: Playbook, n_ops: int, seed: int = 0) -> Delta:
    rng = random.Random(seed)
    ids = [b.id for b in playbook.bullets()]
    return Delta(ops=tuple(Op(OpKind.TAG, bullet_id=rng.choice(ids), helpful=1, harmful=rng.randint(0, 1)) for _ in range(n_ops)))


def best_seconds(playbook: Playbook, delta: Delta, repeats: int = 25) -> float:
    """The fastest of ``repeats`` applies, the collector off: on a loaded machine (2 shared cores)
    a longer apply is more often preempted, so the minimum needs many samples to be the cost."""
    gc.collect()
    gc.disable()
    try:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            playbook.apply(delta)
            times.append(time.perf_counter() - start)
        return min(times)
    finally:
        gc.enable()


def test_apply_5000_tags_on_5000_bullets(benchmark):
    playbook = filled(5000)
    delta = tag_delta(playbook, 5000)
    after, report = benchmark(playbook.apply, delta)
    assert len(report.applied) == 5000
    assert sum(b.helpful for b in after.bullets()) == 5000


def test_apply_with_eviction_on_5000_bullets(benchmark):
    base = filled(5000)
    playbook = Playbook.parse(base.render(), token_budget=base.tokens())
    delta = Delta(ops=tuple(Op(OpKind.ADD, section="other", content=f"new insight {i}") for i in range(1000)))
    after, report = benchmark(playbook.apply, delta)
    assert report.evicted and after.tokens() <= playbook.token_budget


def test_tag_apply_cost_grows_linearly():
    """4x the bullets and ops costs about 4x (quadratic would be 16x); bound 10x for noise."""
    small, large = filled(1500), filled(6000)
    ratio = best_seconds(large, tag_delta(large, 6000)) / best_seconds(small, tag_delta(small, 1500))
    assert ratio < 10, f"apply cost grew {ratio:.1f}x for 4x the work"
