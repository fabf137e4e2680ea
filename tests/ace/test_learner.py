"""ACE as a learner, without HTTP: its traces, its apply (tags summed, edits applied once), and its
registration (what it deploys, loads and writes per version)."""

from __future__ import annotations

from pathlib import Path

from combee_fast.ace.chain import SampleTrace
from combee_fast.ace.learner import AceLearner, tag_ops
from combee_fast.config import SessionConfig
from combee_fast.gepa.candidate import Candidate
from combee_fast.learners import LEARNERS
from combee_fast.ace.playbook import Playbook
from combee_fast.schema import CallError, Example, Rollout, Usage
from combee_fast.ace.records import BulletTag, Delta, Op, OpKind, Reflection

EXAMPLE = Example(index=3, input="q", target="4", split="train")


def _rollout(round_: int, score: float, role: str = "generator") -> Rollout:
    return Rollout(example=EXAMPLE, round=round_, messages=(), answer="4" if score else "5", reasoning="",
                   cited=(), score=score, feedback="", usage=Usage(role=role, sim_latency_s=1.0 + round_))


def _reflection(rollout: Rollout, insight: str, tags: tuple[BulletTag, ...] = (), error: CallError | None = None):
    return Reflection(rollout_id=rollout.id, reasoning="", error_identification="", root_cause="",
                      correct_approach="", key_insight=insight, bullet_tags=tags,
                      usage=Usage(role="reflector", sim_latency_s=0.5), error=error)


def _playbook() -> Playbook:
    playbook, _ = Playbook.empty().apply(Delta(ops=(Op(OpKind.ADD, section="formulas_and_calculations",
                                                       content="Divide by the period count."),)))
    return playbook


def test_a_chain_reports_its_calls_in_the_order_it_made_them_and_its_first_reward() -> None:
    first, second = _rollout(0, 0.0), _rollout(1, 1.0)
    trace = SampleTrace(EXAMPLE.id, (first, second), (_reflection(first, "check the period"),))
    assert [u.role for u, _ in trace.call_outcomes()] == ["generator", "reflector", "generator"]
    assert trace.reward == 0.0 and trace.sim_seconds == 1.0 + 0.5 + 2.0 and not trace.errors()
    assert SampleTrace(EXAMPLE.id, (second,), ()).reward is None  # a carried chain's rest made no first attempt
    collected = _rollout(0, 1.0, role="trace")
    assert SampleTrace(EXAMPLE.id, (collected,), ()).call_outcomes() == []  # collected traces cost no call


def test_tags_of_every_reflection_are_summed_and_hallucinated_ids_dropped() -> None:
    playbook = _playbook()
    bullet = playbook.bullets()[0].id
    rollouts = [_rollout(0, 0.0), _rollout(0, 1.0)]
    traces = [SampleTrace(EXAMPLE.id, (r,), (_reflection(r, "x", (BulletTag(bullet, "helpful"), BulletTag("nope", "harmful"))),))
              for r in rollouts]
    assert tag_ops(traces, playbook) == (Op(OpKind.TAG, bullet_id=bullet, helpful=2, harmful=0),)


async def test_apply_is_one_delta_of_the_tags_and_the_edits_and_says_what_it_kept() -> None:
    learner = AceLearner(calls=None, max_rounds=3)  # type: ignore[arg-type]  # apply makes no call
    playbook = _playbook()
    bullet = playbook.bullets()[0].id
    first = _rollout(0, 0.0)
    trace = SampleTrace(EXAMPLE.id, (first,), (_reflection(first, "check the period", (BulletTag(bullet, "harmful"),)),))
    edit = Op(OpKind.ADD, section="formulas_and_calculations", content="Check the period before dividing.")
    applied = await learner.apply(playbook, [trace], [edit], "combee[0.0]")
    assert applied.artifact.version == playbook.version + 1 and len(applied.artifact) == 2
    assert applied.kept == ("Check the period before dividing.",) and len(applied.log) == 1
    assert applied.artifact.get(bullet).harmful == 1
    assert learner.record(trace).key_insight == "check the period" == learner.insight(learner.record(trace))
    unchanged = await learner.apply(applied.artifact, [], [], "naive[0.1]")
    assert unchanged.artifact.version == applied.artifact.version and unchanged.log == ()


def test_a_failed_reflection_is_no_record() -> None:
    learner = AceLearner(calls=None, max_rounds=3)  # type: ignore[arg-type]
    first = _rollout(0, 0.0)
    failed = SampleTrace(EXAMPLE.id, (first,), (_reflection(first, "", error=CallError("malformed_json", "bad")),))
    assert learner.record(failed) is None
    assert AceLearner(calls=None, max_rounds=3, from_rollouts=True).continuation(failed, Playbook.empty(), "", epoch=0) is None  # type: ignore[arg-type]


def test_ace_deploys_its_playbook_loads_only_playbook_files_and_writes_each_version(tmp_path: Path) -> None:
    ace = LEARNERS.load("ace")  # completed with the defaults it leaves out (combee_fast.kinds)
    playbook = _playbook()
    assert ace.deployable(playbook) is playbook and ace.summary(playbook) == {"bullets": 1}
    assert ace.lessons(playbook) == ["Divide by the period count."]
    [(name, data)] = ace.version_files(playbook)
    assert name == f"playbooks/v{playbook.version:05d}.json" and Playbook.from_bytes(data).render() == playbook.render()
    (tmp_path / "playbooks").mkdir()
    (tmp_path / name).write_bytes(data)
    config = SessionConfig()
    assert ace.load_version(tmp_path, playbook.version, config).render() == playbook.render()
    assert ace.load_version(tmp_path, 0, config).version == 0
    playbook.save(tmp_path / "final.json")
    Candidate.seed().save(tmp_path / "candidate.json")
    assert ace.load(tmp_path / "final.json").render() == playbook.render()
    assert ace.load(tmp_path / "candidate.json") is None  # GEPA's file, not ACE's
    assert set(ace.methods) == {"sequential", "naive", "combee"} and ace.learning_roles == ("reflector", "curator", "reducer")
