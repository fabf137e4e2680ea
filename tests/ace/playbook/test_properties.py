"""Property tests of Playbook over random sequences of deltas mixing valid and invalid ops.

Ops are drawn abstractly ("TAG a live bullet", "UPDATE a removed one", "ADD to an invalid
section", ...) and made concrete against the snapshot they are applied to, so that most of them
hit real ids. Every apply is checked against the invariants below and, without a budget, against
an independent sequential model of the op rules.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from combee_fast.ace.playbook import Playbook
from combee_fast.ace.playbook.format import bullet_cost, id_counter, make_id, section_cost, text_length
from combee_fast.ace.records import Bullet, Delta, Op, OpKind
from combee_fast.tokens import estimate_tokens

MAX_CHARS = 40
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VALID_SECTIONS = ["other", "formulas_and_calculations", "Common Mistakes", "my_rules", "tool-calls"]
INVALID_SECTIONS = ["Bad!", "", "9x", "x" * 41]
section_names = st.sampled_from(VALID_SECTIONS * 4 + INVALID_SECTIONS)
contents = st.one_of(
    st.text(alphabet="abc XYZ:[]#=-_.", min_size=1, max_size=MAX_CHARS),
    st.text(alphabet="abc XYZ:[]#=-_.", min_size=1, max_size=MAX_CHARS),
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=MAX_CHARS + 5),
    st.sampled_from(["", "   ", "a\nb", "tail\n", "x" * (MAX_CHARS + 1), " :: ] [", "## other"]),
)
targets = st.tuples(st.sampled_from(["live"] * 8 + ["removed", "fresh", "junk", "none"]), st.integers(0, 60))
kinds = st.sampled_from([OpKind.ADD] * 4 + [OpKind.TAG] * 4 + [OpKind.UPDATE] * 2 + [OpKind.REMOVE])
abstract_ops = st.tuples(kinds, section_names, contents, targets, st.integers(-1, 3), st.integers(-1, 3))
deltas = st.lists(st.lists(abstract_ops, max_size=16), min_size=1, max_size=10)
budgets = st.one_of(st.none(), st.integers(12, 30), st.integers(12, 120), st.integers(12, 400))


def concrete(abstract: tuple, playbook: Playbook) -> Op:
    """The op ``abstract`` describes, with its target resolved against ``playbook``."""
    kind, section, content, (target, pick), helpful, harmful = abstract
    live = [b.id for b in playbook.bullets()]
    removed = sorted(playbook.removed_ids())
    if target == "live" and live:
        bullet_id = live[pick % len(live)]
    elif target == "removed" and removed:
        bullet_id = removed[pick % len(removed)]
    elif target == "fresh":  # an id an ADD earlier in the same delta may have been given
        bullet_id = make_id("other", playbook.next_id + pick % 3)
    elif target == "none":
        bullet_id = None
    else:
        bullet_id = f"junk-{pick}"
    return Op(kind, section=section, content=content, bullet_id=bullet_id, helpful=helpful, harmful=harmful)


def state_of(playbook: Playbook) -> tuple:
    return (
        playbook.version,
        playbook.sections,
        playbook.next_id,
        playbook.bullets(),
        playbook.removed_ids(),
        playbook.render(),
        playbook.tokens(),
    )


def eviction_key(bullet: Bullet) -> tuple:
    return (bullet.helpful - bullet.harmful, bullet.created_version, id_counter(bullet.id), bullet.id)


# -- invariants of one snapshot -----------------------------------------------------------------


def check_snapshot(playbook: Playbook) -> None:
    bullets = playbook.bullets()
    ids = [b.id for b in bullets]
    assert len(ids) == len(set(ids)) == len(playbook)
    assert all(bullet_id in playbook and playbook.get(bullet_id) is not None for bullet_id in ids)
    assert not set(ids) & playbook.removed_ids()
    counters = [id_counter(i) for i in (*ids, *playbook.removed_ids())]
    assert all(c is not None and c < playbook.next_id for c in counters)
    order = [playbook.sections.index(b.section) for b in bullets]
    assert order == sorted(order)
    for bullet in bullets:
        assert bullet.content == bullet.content.strip() and 0 < len(bullet.content) <= MAX_CHARS
        assert len(bullet.content.splitlines()) == 1
        assert bullet.helpful >= 0 and bullet.harmful >= 0
        assert bullet.created_version <= bullet.updated_version <= playbook.version
    text = playbook.render()
    assert playbook.tokens() == estimate_tokens(text)
    if playbook.token_budget is not None:
        assert playbook.tokens() <= playbook.token_budget
    reparsed = Playbook.parse(
        text, sections=playbook.sections, token_budget=playbook.token_budget, max_bullet_chars=MAX_CHARS
    )
    assert reparsed.render() == text
    assert [(b.id, b.section, b.content, b.helpful, b.harmful) for b in reparsed.bullets()] == [
        (b.id, b.section, b.content, b.helpful, b.harmful) for b in bullets
    ]


# -- invariants of one apply --------------------------------------------------------------------


def check_apply(old: Playbook, delta: Delta, new: Playbook, report, ever_seen: set[str]) -> None:
    indexes = sorted([*report.applied, *(r.op_index for r in report.rejected)])
    assert indexes == list(range(len(delta.ops)))
    for rejected in report.rejected:
        assert rejected.op is delta.ops[rejected.op_index] and rejected.reason.strip()
    if not report.applied:
        assert new is old and report.added_ids == () and report.evicted == ()
        return
    assert new.version == old.version + 1
    added_ops = [i for i in report.applied if delta.ops[i].kind is OpKind.ADD]
    assert len(report.added_ids) == len(added_ops) == len(set(report.added_ids))
    assert not set(report.added_ids) & ever_seen  # ids are never reused, live or removed
    assert old.removed_ids() <= new.removed_ids()
    evicted_ids = [b.id for b in report.evicted]
    assert all(i in new.removed_ids() and i not in new for i in evicted_ids)
    for bullet_id in report.added_ids:
        assert bullet_id in new or bullet_id in evicted_ids or bullet_id in new.removed_ids()
    if report.evicted:
        keys = [eviction_key(b) for b in report.evicted]
        assert keys == sorted(keys)
        assert all(keys[-1] <= eviction_key(b) for b in new.bullets())
        last = report.evicted[-1]
        section_back = 0 if any(b.section == last.section for b in new.bullets()) else section_cost(last.section)
        cost = len(new.render()) + 2 if len(new) else 0
        assert text_length(cost + section_back + bullet_cost(last)) > new.token_budget * 4  # stopped in time
    # Rejected ops had no effect: the applied ops alone give the very same result.
    only_applied = Delta(ops=tuple(delta.ops[i] for i in report.applied), rollout_ids=delta.rollout_ids)
    again, again_report = old.apply(only_applied)
    assert again_report.rejected == () and state_of(again) == state_of(new)
    assert (again_report.added_ids, again_report.evicted) == (report.added_ids, report.evicted)
    difference = old.diff(new)
    assert set(difference.added) <= set(report.added_ids)
    assert set(difference.removed) == {b.id for b in old.bullets()} - {b.id for b in new.bullets()}


@SETTINGS
@given(budget=budgets, script=deltas)
def test_random_deltas_keep_every_invariant(budget, script):
    playbook = Playbook.empty(token_budget=budget, max_bullet_chars=MAX_CHARS)
    ever_seen: set[str] = set()
    for step, abstract in enumerate(script):
        delta = Delta(ops=tuple(concrete(a, playbook) for a in abstract), rollout_ids=(f"r{step}",))
        before = state_of(playbook)
        new, report = playbook.apply(delta)
        assert state_of(playbook) == before  # the old snapshot is untouched
        check_apply(playbook, delta, new, report, ever_seen)
        check_snapshot(new)
        ever_seen |= {b.id for b in new.bullets()} | new.removed_ids()
        playbook = new
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pb.json"
        playbook.save(path)
        loaded = Playbook.load(path)
    assert state_of(loaded) == state_of(playbook)
    assert (loaded.token_budget, loaded.max_bullet_chars) == (budget, MAX_CHARS)


# -- an independent sequential model of the op rules (no budget) --------------------------------


class Model:
    """The op rules written plainly: each op applied at once, tags included."""

    def __init__(self, sections: tuple[str, ...]) -> None:
        self.sections = list(sections)
        self.bullets: dict[str, list] = {}  # id -> [section, content, helpful, harmful]
        self.removed: set[str] = set()
        self.counter = 1

    def apply(self, ops: tuple[Op, ...]) -> list[bool]:
        return [self.apply_one(op) for op in ops]

    def apply_one(self, op: Op) -> bool:
        content = op.content.strip()
        content_ok = 0 < len(content) <= MAX_CHARS and len(content.splitlines()) == 1
        target = op.bullet_id if op.kind is OpKind.UPDATE else None  # an ADD's id is ignored
        duplicate = any(other[1] == content for other_id, other in self.bullets.items() if other_id != target)
        if op.kind is OpKind.ADD:
            section = re.sub(r"[\s-]+", "_", op.section.strip().lower())
            if not (re.fullmatch(r"[a-z][a-z0-9_]{0,39}", section) and content_ok) or duplicate:
                return False
            if section not in self.sections:
                self.sections.append(section)
            self.bullets[make_id(section, self.counter)] = [section, content, 0, 0]
            self.counter += 1
            return True
        bullet = self.bullets.get(op.bullet_id)
        if bullet is None:
            return False
        if op.kind is OpKind.UPDATE:
            if not content_ok or content == bullet[1] or duplicate:
                return False
            bullet[1] = content
        elif op.kind is OpKind.REMOVE:
            del self.bullets[op.bullet_id]
            self.removed.add(op.bullet_id)
        elif op.kind is OpKind.TAG:
            if op.helpful < 0 or op.harmful < 0 or op.helpful == op.harmful == 0:
                return False
            bullet[2] += op.helpful
            bullet[3] += op.harmful
        return True

    def rendered_rows(self) -> list[tuple]:
        rows = [(i, *b) for i, b in self.bullets.items()]
        return sorted(rows, key=lambda row: self.sections.index(row[1]))  # stable: creation order


@SETTINGS
@given(script=deltas)
def test_apply_agrees_with_a_sequential_model(script):
    playbook = Playbook.empty(max_bullet_chars=MAX_CHARS)
    model = Model(playbook.sections)
    for abstract in script:
        delta = Delta(ops=tuple(concrete(a, playbook) for a in abstract))
        playbook, report = playbook.apply(delta)
        took_effect = model.apply(delta.ops)
        assert report.applied == tuple(i for i, ok in enumerate(took_effect) if ok)
        assert [(b.id, b.section, b.content, b.helpful, b.harmful) for b in playbook.bullets()] == model.rendered_rows()
        assert playbook.removed_ids() == model.removed and playbook.next_id == model.counter
        assert list(playbook.sections) == model.sections
