"""The checkpointed state and the run directory's reopening for a resume: a typed, checksummed
file that a flipped byte, a cut, a pickle or an edited run file cannot get past (the end-to-end
proofs, with real processes killed, are in tests/cli/test_resume.py)."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import pytest

from combee_fast.ace.kind import ACE
from combee_fast.config import HISTORY_KEPT, SessionConfig
from combee_fast.errors import CheckpointError, ConfigError
from combee_fast.methods.combee import CarriedChains
from combee_fast.ace.playbook import Playbook
from combee_fast.protocols.running import StopRule
from combee_fast.record.checkpoint import CHECKPOINT_FILE, LEGACY_CHECKPOINT_FILE, read_checkpoint
from combee_fast.record.concurrency import ConcurrencyTotal
from combee_fast.record.ledger import CallCounts, LedgerRow
from combee_fast.record.rundir import RunDir
from combee_fast.record.state import CallsRecord, TrainState
from combee_fast.schema import Trajectory
from combee_fast.ace.records import Delta, Op, OpKind
from combee_fast.tasks.registry import get_task

CARRIED = CarriedChains[Playbook] | None


def _row(step: int) -> LedgerRow:
    return LedgerRow(method="m", epoch=0, step=step, batch_size=1, batch_reason="fixed", first_try_accuracy=0.0,
                     calls={}, models={}, prompt_tokens={}, completion_tokens={}, sim_seconds=0.0, wall_seconds=0.0,
                     cumulative_sim_seconds=0.0, version=0, size=0, added=0, rejected=0, evicted=0,
                     errors=())


def _playbook() -> Playbook:
    ops = tuple(Op(OpKind.ADD, section="formulas_and_calculations", content=f"lesson {i}: divide before rounding")
                for i in range(3))
    return Playbook.empty().apply(Delta(ops=ops, source="test"))[0]


def _started(root: Path) -> RunDir:
    run_dir = RunDir(root)
    run_dir.write_config(SessionConfig())
    run_dir.write_splits([get_task("formula").load("val[0:3]").manifest])
    run_dir.start()
    return run_dir


def _save(run_dir: RunDir, state: TrainState) -> None:
    run_dir.save_checkpoint(state, ACE, method="combee", seed=0)


def _decoded(root: Path) -> TrainState:
    return read_checkpoint(root).state(ACE, method="combee", plan_state_type=type(None), carried_type=CARRIED)


def test_reopening_cuts_the_lines_of_an_unfinished_step_and_keeps_the_latest_rows(tmp_path: Path) -> None:
    run_dir = _started(tmp_path / "run")
    for step in range(HISTORY_KEPT + 500):
        run_dir.append_ledger(_row(step))
    _save(run_dir, TrainState.fresh(Playbook.empty()))  # the marks of the files now
    run_dir.append_ledger(_row(HISTORY_KEPT + 500))  # written, but its step never checkpointed
    run_dir.close()
    reopened = RunDir.reopen(tmp_path / "run")
    rows = reopened.read_ledger()
    assert len(rows) == HISTORY_KEPT and rows[-1].step == HISTORY_KEPT + 499  # bounded; the cut line is gone
    reopened.append_ledger(_row(HISTORY_KEPT + 500))
    _save(reopened, TrainState.fresh(Playbook.empty()))  # the running hash goes on from the verified prefix
    reopened.close()
    assert len((tmp_path / "run" / "ledger.jsonl").read_bytes().splitlines()) == HISTORY_KEPT + 501
    RunDir.reopen(tmp_path / "run").close()


def _trajectory(item: int) -> Trajectory:
    return Trajectory(key=f"e0/q{item}/r0/v0", item_id=f"q{item}", round=0, version=0, context_sha="c0ffee",
                      seed=item, steps=(), answer="done", reward=1.0, feedback="all checks passed")


def test_reopening_keeps_the_trajectories_a_killed_step_finished_but_a_cut_line(tmp_path: Path) -> None:
    run_dir = _started(tmp_path / "run")
    for step in range(3):  # one finished episode per step; the third step is killed
        run_dir.append_trajectory({"id": f"q{step}", "episode": _trajectory(step)})
        if step < 2:
            _save(run_dir, TrainState.fresh(Playbook.empty()))
    run_dir.close()
    path = tmp_path / "run" / "trajectories.jsonl"
    with path.open("ab") as file:
        file.write(b'{"id":"q3","episode":{"key":"e0/q3')  # the line the kill cut
    reopened = RunDir.reopen(tmp_path / "run")
    assert [t.key for t in reopened.resumed_trajectories()] == ["e0/q1/r0/v0", "e0/q2/r0/v0"]  # since the previous checkpoint
    assert path.read_bytes().endswith(b"}\n") and len(path.read_bytes().splitlines()) == 3
    reopened.append_trajectory({"id": "q3", "episode": _trajectory(3)})
    _save(reopened, TrainState.fresh(Playbook.empty()))  # the running hash went on over the kept lines
    reopened.close()
    again = RunDir.reopen(tmp_path / "run")
    assert [t.key for t in again.resumed_trajectories()] == ["e0/q2/r0/v0", "e0/q3/r0/v0"]
    again.close()


def test_a_checkpoint_round_trips_every_kept_field_with_its_types(tmp_path: Path) -> None:
    run_dir = _started(tmp_path / "run")
    playbook, snapshot = _playbook(), Playbook.empty()
    counts = CallCounts(calls={"generator": 4}, retries={"generator": {"429": 2}}, errors={"reflector": {"5xx": 1}})
    state = TrainState(artifact=playbook, best=snapshot, steps=3, epoch=1, position=40, best_score=-0.0,
                       sim_seconds=1e-300, counts=counts, carried=CarriedChains((("q7", -2.5),), snapshot, 1),
                       calls_record=CallsRecord({"generator": 9}, {"curator": 1}, 2),
                       episodes=12, episodes_failed=3, env_seconds=4.25)
    state.stopping = "not kept"
    _save(run_dir, state)
    run_dir.close()
    loaded = _decoded(tmp_path / "run")
    assert loaded.artifact.to_bytes() == playbook.to_bytes() and loaded.best.to_bytes() == snapshot.to_bytes()
    assert (loaded.steps, loaded.epoch, loaded.position, loaded.best_score, loaded.sim_seconds) == (3, 1, 40, 0.0, 1e-300)
    assert loaded.counts == counts and loaded.calls_record == CallsRecord({"generator": 9}, {"curator": 1}, 2)
    assert isinstance(loaded.carried, CarriedChains) and loaded.carried.chains == (("q7", -2.5),)
    assert isinstance(loaded.carried.snapshot, Playbook) and loaded.carried.snapshot.version == 0
    assert (loaded.episodes, loaded.episodes_failed, loaded.env_seconds) == (12, 3, 4.25)
    assert loaded.stopping is None and not loaded.ledger


def test_every_corruption_of_a_checkpoint_is_refused_in_one_line(tmp_path: Path) -> None:
    run_dir = _started(tmp_path / "run")
    _save(run_dir, TrainState(artifact=_playbook(), best=_playbook(), steps=2))
    run_dir.close()
    path = tmp_path / "run" / CHECKPOINT_FILE
    good = path.read_bytes()
    rng = random.Random(0)
    for _ in range(400):
        data = bytearray(good)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= rng.randint(1, 255)
        path.write_bytes(bytes(data))
        with pytest.raises(CheckpointError) as caught:
            _decoded(tmp_path / "run")
        assert "\n" not in str(caught.value)
    for cut in (0, 7, 51, len(good) - 1):
        path.write_bytes(good[:cut])
        with pytest.raises(CheckpointError, match="cut|not a combee checkpoint"):
            read_checkpoint(tmp_path / "run")
    path.write_bytes(good)
    with pytest.raises(CheckpointError, match="learner 'ace' method 'combee', not of 'ace' 'naive'"):
        read_checkpoint(tmp_path / "run").state(ACE, method="naive", plan_state_type=type(None), carried_type=CARRIED)
    with pytest.raises(CheckpointError, match="does not decode for this run"):
        read_checkpoint(tmp_path / "run").state(ACE, method="combee", plan_state_type=int, carried_type=CARRIED)


class _Boom:
    def __reduce__(self):
        return (Path("/tmp/combee-pickle-ran").touch, ())


def test_a_pickle_is_never_loaded(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}")
    (run / LEGACY_CHECKPOINT_FILE).write_bytes(pickle.dumps(_Boom()))
    Path("/tmp/combee-pickle-ran").unlink(missing_ok=True)
    with pytest.raises(CheckpointError, match="a pickle, which could run code"):
        RunDir.reopen(run)
    assert not Path("/tmp/combee-pickle-ran").exists()
    (run / CHECKPOINT_FILE).write_bytes(pickle.dumps(_Boom()))
    with pytest.raises(CheckpointError, match="not a combee checkpoint"):
        RunDir.reopen(run)
    assert not Path("/tmp/combee-pickle-ran").exists()
    with pytest.raises(CheckpointError, match="not a resumable run directory"):
        read_checkpoint(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="not a run directory"):
        RunDir.reopen(tmp_path / "nowhere")


@pytest.mark.parametrize(("name", "change", "said"), [
    ("config.json", lambda p: p.write_text(p.read_text().replace('"seed": 0', '"seed": 1')), "changed since"),
    ("splits.json", lambda p: p.write_text("[]"), "changed since"),
    ("splits.json", lambda p: p.unlink(), "is missing"),
    ("ledger.jsonl", lambda p: p.write_bytes(p.read_bytes()[:-5]), "it was cut"),
    ("ledger.jsonl", lambda p: p.write_bytes(p.read_bytes().replace(b'"step":1', b'"step":7')), "bytes differ"),
    ("deltas.jsonl", lambda p: p.write_bytes(b""), "it was cut"),
    ("errors.jsonl", lambda p: p.write_bytes(b"x" + p.read_bytes()[1:]), "bytes differ"),
    ("trajectories.jsonl", lambda p: p.write_bytes(p.read_bytes().replace(b"q0", b"q9")), "bytes differ"),
    ("trajectories.jsonl", lambda p: p.unlink(), "it was cut"),
])
def test_a_run_file_changed_or_cut_since_the_checkpoint_refuses_the_resume(tmp_path: Path, name, change,
                                                                           said) -> None:
    run_dir = _started(tmp_path / "run")
    for step in range(3):
        run_dir.append_ledger(_row(step))
    run_dir.append_deltas([{"op": "ADD", "content": "x"}])
    run_dir.append_error({"role": "generator", "kind": "timeout"})
    run_dir.append_trajectory({"id": "q0", "episode": _trajectory(0)})
    _save(run_dir, TrainState.fresh(Playbook.empty()))
    run_dir.close()
    before = (tmp_path / "run" / "ledger.jsonl").read_bytes()
    change(tmp_path / "run" / name)
    with pytest.raises(CheckpointError, match=said) as caught:
        RunDir.reopen(tmp_path / "run")
    assert name in str(caught.value) and "\n" not in str(caught.value)
    if name != "ledger.jsonl":
        assert (tmp_path / "run" / "ledger.jsonl").read_bytes() == before  # a refused resume cuts nothing


def test_a_run_directory_is_held_by_one_process_at_a_time(tmp_path: Path) -> None:
    run_dir = _started(tmp_path / "run")
    _save(run_dir, TrainState.fresh(Playbook.empty()))
    with pytest.raises(ConfigError, match="in use by another combee process"):
        RunDir.reopen(tmp_path / "run")
    run_dir.close()
    RunDir.reopen(tmp_path / "run").close()  # released at close


class _StopAtOnce(StopRule):
    """Ends a run before its first step, as a signal arriving during start-up would."""

    ends = "interrupt"

    def check(self, state: TrainState) -> str | None:
        return "interrupted before the first step" if state.steps == 0 else None


async def test_a_run_resumed_from_its_first_checkpoint_ends_as_an_uninterrupted_one(tmp_path: Path) -> None:
    """The checkpoint written before the first step holds the batch plan's state too (the live
    planner's), so a run killed before its first step completed resumes."""
    import msgspec

    from combee_fast.config import CacheConfig, SimConfig, TaskConfig, TrainConfig
    from combee_fast.run.batch_plans import LivePlanState
    from combee_fast.session import open_session

    config = SessionConfig(task=TaskConfig(train_split="train[0:60]", val_split="val[0:10]"),
                           train=TrainConfig(batch_size=None), sim=SimConfig("flat", 1e-4),
                           cache=CacheConfig(str(tmp_path / "cache.jsonl"), "record"))
    whole = RunDir(tmp_path / "whole")
    async with open_session(config) as session:
        await session.train(run_dir=whole)
    whole.close()
    replay = msgspec.structs.replace(config, cache=CacheConfig(str(tmp_path / "cache.jsonl"), "replay"))
    first = RunDir(tmp_path / "resumed")
    async with open_session(replay) as session:
        stopped = await session.train(run_dir=first, stops=(_StopAtOnce(),))
    first.close()
    kept = read_checkpoint(tmp_path / "resumed").state(ACE, method="combee", plan_state_type=LivePlanState,
                                                       carried_type=CARRIED)
    assert stopped.interrupted and stopped.steps == 0 and kept.plan_state is not None
    again = RunDir.reopen(tmp_path / "resumed")
    async with open_session(replay) as session:
        result = await session.train(run_dir=again)
    again.close()
    assert result.steps > 1 and not result.interrupted
    assert (tmp_path / "resumed" / "final.json").read_bytes() == (tmp_path / "whole" / "final.json").read_bytes()


@pytest.mark.parametrize("forged", [dict(steps=2 ** 62), dict(epoch=-1), dict(position=-2 ** 62), dict(calls=2 ** 62),
                                    dict(sim_seconds=float("inf")), dict(env_seconds=-1.0), dict(best_score=5.0),
                                    dict(episodes_failed=-3), dict(stale_validations=2 ** 60)])
def test_a_forged_checkpoint_with_its_checksum_recomputed_is_refused_when_a_value_is_out_of_range(
        tmp_path: Path, forged: dict[str, object]) -> None:
    run_dir = _started(tmp_path / "run")
    _save(run_dir, TrainState(artifact=_playbook(), best=_playbook(), **{"steps": 2, **forged}))  # type: ignore[arg-type]
    run_dir.close()
    with pytest.raises(CheckpointError, match="does not decode") as caught:
        _decoded(tmp_path / "run")
    assert f".{next(iter(forged))}`" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("forged, path", [
    (dict(counts=CallCounts(calls={"generator": -3})), "$.state.counts.calls[...]"),
    (dict(val_counts=CallCounts(errors={"generator": {"timeout": -1}})), "$.state.val_counts.errors[...][...]"),
    (dict(calls_record=CallsRecord(calls={"curator": -2})), "$.state.calls_record.calls[...]"),
    (dict(calls_record=CallsRecord(failed=-1)), "$.state.calls_record.failed"),
    (dict(concurrency={"generator": ConcurrencyTotal(peak=-1)}), "$.state.concurrency[...].peak"),
])
def test_a_forged_checkpoint_with_a_nested_count_out_of_range_is_refused(
        tmp_path: Path, forged: dict[str, object], path: str) -> None:
    """A nested negative call count resumed with exit 0 and reached summary.json (issue 53): the
    counts inside a checkpoint are held to the ranges its top-level ones are."""
    run_dir = _started(tmp_path / "run")
    _save(run_dir, TrainState(artifact=_playbook(), best=_playbook(), steps=2, **forged))  # type: ignore[arg-type]
    run_dir.close()
    with pytest.raises(CheckpointError, match="does not decode") as caught:
        _decoded(tmp_path / "run")
    assert f"`{path}`" in str(caught.value) and "\n" not in str(caught.value)


async def test_a_carried_chain_of_an_item_the_split_does_not_hold_is_one_line_not_a_key_error() -> None:
    """A forged (or another split's) checkpoint carrying a chain of an unknown item ended the
    resume in a KeyError traceback (issue 53): it is a CheckpointError naming the item."""
    from combee_fast.config import CombeeConfig, MapConfig
    from combee_fast.methods.combee import Combee

    items = {example.id: example for example in get_task("formula").load("train[0:3]").examples}
    method = Combee(None, MapConfig(), CombeeConfig(), seed=0)  # type: ignore[arg-type]  # refused before any call
    with pytest.raises(CheckpointError, match=r"^cannot resume: the checkpoint carries a chain of item 'forged:9'"):
        await method.resume(CarriedChains((("forged:9", 0.0),), _playbook(), 0), items)
