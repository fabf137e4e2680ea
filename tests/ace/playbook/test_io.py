"""Playbook files on disk: round trip, the version-1 fixture, and clear errors for bad files."""

import json
from pathlib import Path

import pytest

from combee_fast.errors import PlaybookFileError
from combee_fast.ace.playbook import MAX_BULLET_CHARS, Playbook
from combee_fast.schema import SCHEMA_VERSION
from combee_fast.ace.records import Delta, Op, OpKind

V1_FIXTURE = Path(__file__).parents[2] / "data" / "playbook_v1.json"


def snapshot(playbook: Playbook) -> tuple:
    return (
        playbook.version,
        playbook.sections,
        playbook.token_budget,
        playbook.max_bullet_chars,
        playbook.next_id,
        playbook.bullets(),
        playbook.removed_ids(),
        playbook.render(),
    )


@pytest.fixture
def history() -> Playbook:
    playbook = Playbook.empty(token_budget=500, max_bullet_chars=200)
    playbook, _ = playbook.apply(
        Delta(
            ops=(
                Op(OpKind.ADD, section="formulas_and_calculations", content="ROI = gain / cost"),
                Op(OpKind.ADD, section="units", content="1 bp = 0.01%"),
                Op(OpKind.ADD, section="other", content="scratch"),
            ),
            rollout_ids=("train:0#r0", "train:1#r0"),
        )
    )
    playbook, _ = playbook.apply(
        Delta(ops=(Op(OpKind.REMOVE, bullet_id="other-00003"), Op(OpKind.TAG, bullet_id="units-00002", helpful=4)))
    )
    return playbook


def test_save_load_round_trip_keeps_everything(history, tmp_path):
    path = tmp_path / "pb.json"
    history.save(path)
    loaded = Playbook.load(path)
    assert snapshot(loaded) == snapshot(history)
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION


def test_loaded_playbook_never_reuses_a_removed_id(history, tmp_path):
    history.save(tmp_path / "pb.json")
    loaded = Playbook.load(tmp_path / "pb.json")
    _, report = loaded.apply(Delta(ops=(Op(OpKind.ADD, section="other", content="new"),)))
    assert report.added_ids == ("other-00004",)  # other-00003 was removed before saving


def test_save_replaces_the_file_and_leaves_no_temporary_files(history, tmp_path):
    path = tmp_path / "pb.json"
    Playbook.empty().save(path)
    history.save(path)
    assert Playbook.load(path).version == history.version
    assert [p.name for p in tmp_path.iterdir()] == ["pb.json"]


def test_save_into_a_missing_folder_raises_and_writes_nothing(history, tmp_path):
    with pytest.raises(FileNotFoundError):
        history.save(tmp_path / "missing" / "pb.json")
    assert list(tmp_path.iterdir()) == []


def test_version_1_fixture_loads_with_migration():
    playbook = Playbook.load(V1_FIXTURE)
    assert playbook.version == 4 and playbook.next_id == 7
    assert playbook.sections[-1] == "units"
    assert playbook.max_bullet_chars == MAX_BULLET_CHARS and playbook.token_budget is None
    assert playbook.removed_ids() == {"form-00003", "check-00005"}
    strat = playbook.get("strat-00001")
    assert (strat.helpful, strat.harmful, strat.created_version, strat.updated_version) == (5, 1, 0, 0)
    assert strat.source_rollout_ids == ()
    assert [b.id for b in playbook.bullets()] == ["strat-00001", "form-00002", "mist-00004", "units-00006"]


def test_version_1_playbook_keeps_learning_and_saves_as_current_version(tmp_path):
    playbook = Playbook.load(V1_FIXTURE)
    after, report = playbook.apply(
        Delta(ops=(Op(OpKind.ADD, section="units", content="1% = 100 bp"), Op(OpKind.UPDATE, bullet_id="form-00003", content="x")))
    )
    assert report.added_ids == ("units-00007",)
    assert report.rejected[0].reason.startswith("removed")
    after.save(tmp_path / "pb.json")
    assert json.loads((tmp_path / "pb.json").read_text())["schema_version"] == SCHEMA_VERSION
    assert snapshot(Playbook.load(tmp_path / "pb.json")) == snapshot(after)


def write(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "bad.json"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def current_file(history: Playbook, tmp_path: Path) -> dict:
    history.save(tmp_path / "good.json")
    return json.loads((tmp_path / "good.json").read_text())


@pytest.mark.parametrize(
    "content, problem",
    [
        ("", "not a playbook file"),
        ("{not json", "not a playbook file"),
        ("[1, 2]", "not a playbook file"),
        ('{"version": 3}', "schema_version"),
        ('{"schema_version": "2"}', "not a playbook file"),
        ('{"schema_version": 3, "future": true}', "unsupported schema_version 3"),
        ('{"schema_version": 0}', "unsupported schema_version 0"),
        (b"\xff\xfe\x00garbage", "not a playbook file"),
    ],
)
def test_corrupt_or_unknown_files_name_path_and_problem(tmp_path, content, problem):
    path = write(tmp_path, content)
    with pytest.raises(PlaybookFileError, match=problem) as caught:
        Playbook.load(path)
    assert caught.value.path == str(path) and str(path) in str(caught.value)


def test_truncated_file_is_reported(history, tmp_path):
    history.save(tmp_path / "good.json")
    data = (tmp_path / "good.json").read_bytes()
    for cut in (1, len(data) // 3, len(data) // 2, len(data) - 3):
        path = write(tmp_path, data[:cut])
        with pytest.raises(PlaybookFileError) as caught:
            Playbook.load(path)
        assert caught.value.path == str(path)


def test_missing_file_is_reported(tmp_path):
    with pytest.raises(PlaybookFileError, match="cannot read"):
        Playbook.load(tmp_path / "nope.json")


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda f: f["bullets"].append(dict(f["bullets"][0])), "duplicate bullet id"),
        (lambda f: f.update(next_id=2), "next_id 2 would collide"),
        (lambda f: f["removed_ids"].append(f["bullets"][0]["id"]), "both live and removed"),
        (lambda f: f["bullets"][0].update(section="nowhere"), "undeclared section"),
        (lambda f: f["bullets"][0].update(content="a\nb"), "line break"),
        (lambda f: f["bullets"][0].update(helpful=-1), "negative counter"),
        (lambda f: f["bullets"][0].update(id="no counter"), "invalid bullet id"),
        (lambda f: f["bullets"][0].update(created_version=9), "versions out of order"),
        (lambda f: f.update(token_budget=5), "over token_budget"),
        (lambda f: f["bullets"][0].update(helpful="many"), r"\$\.bullets\[0\]\.helpful"),
        (lambda f: f.update(extra=1), "unknown field `extra`"),
        (lambda f: f.pop("sections"), "missing required field `sections`"),
    ],
)
def test_files_breaking_playbook_rules_are_reported(history, tmp_path, edit, problem):
    file = current_file(history, tmp_path)
    edit(file)
    path = write(tmp_path, json.dumps(file))
    with pytest.raises(PlaybookFileError, match=problem) as caught:
        Playbook.load(path)
    assert caught.value.path == str(path)


def test_version_1_file_with_wrong_layout_is_reported(tmp_path):
    v1 = json.loads(V1_FIXTURE.read_text())
    v1["bullets"][0]["created_version"] = 1  # a field version 1 never had
    path = write(tmp_path, json.dumps(v1))
    with pytest.raises(PlaybookFileError, match="schema_version 1 layout mismatch"):
        Playbook.load(path)
