"""The experiment card: the shipped Formula card is complete; every missing field is listed at once;
a card inconsistent with its data is refused."""

from __future__ import annotations

import tomllib
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from combee_fast.errors import CardError
from combee_fast.record.usage import usage_path
from combee_fast.verify.card import CANARY_POLICIES, Card, card_summary, field_problems, load_card

CARD = Path(__file__).parents[2] / "cards" / "formula.toml"


def write_card(path: Path, table: dict) -> Path:
    """``table`` as TOML (only the shapes a card uses: tables, arrays of tables, scalars)."""

    def scalar(value: object) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):
            return msgspec.json.encode(value).decode()
        if isinstance(value, dict):
            return "{" + ", ".join(f"{k} = {scalar(v)}" for k, v in value.items()) + "}"
        return repr(value)

    lines: list[str] = []

    def emit(prefix: str, table: dict, array: bool = False) -> None:
        if prefix:
            lines.append(f"[[{prefix}]]" if array else f"[{prefix}]")
        nested = []
        for key, value in table.items():
            if isinstance(value, dict) and key != "options" and key != "endpoints":
                nested.append((key, value, False))
            elif isinstance(value, list) and value and isinstance(value[0], dict):
                nested.extend((key, item, True) for item in value)
            else:
                lines.append(f"{key} = {scalar(value)}")
        for key, value, is_array in nested:
            emit(f"{prefix}.{key}" if prefix else key, value, is_array)

    emit("", table)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def table() -> dict:
    return tomllib.loads(CARD.read_text())


def test_the_shipped_formula_card_is_complete_and_pins_the_bundled_splits():
    card = load_card(CARD)
    assert isinstance(card, Card)
    assert card.roles() == {"train": "train", "selection": "selection", "test": "test"}
    assert card.serial_baseline.rollouts_to_converge == "unknown"
    assert card.failure_cost.canary_policy in CANARY_POLICIES
    summary = card_summary(card)
    assert summary[0] == "card formula-combee-b40: complete" and any("binding: rollouts" in s for s in summary)


def test_the_writer_round_trips_the_card(tmp_path, table):
    assert load_card(write_card(tmp_path / "c.toml", table)) == load_card(CARD)


def test_every_missing_field_is_listed_in_one_error(tmp_path, table):
    del table["task"]["input_shape"]
    del table["hardware"][1]["gpu_type"]
    del table["hardware"][0]["sim_preset"]
    table["budget"].pop("binding")
    table["eval_set"]["owner"] = "  "  # blank is missing
    del table["claim"]
    table["eval_set"]["splits"][2].pop("sha256")
    with pytest.raises(CardError) as caught:
        load_card(write_card(tmp_path / "c.toml", table))
    assert caught.value.missing == [
        "task.input_shape", "hardware[0].sim_preset|endpoints", "hardware[1].gpu_type", "budget.binding",
        "eval_set.splits[2].sha256", "eval_set.owner", "claim.speedup", "claim.margin", "claim.target_score",
    ]
    message = str(caught.value)
    assert "\n" not in message and "9 missing fields: task.input_shape, " in message


def test_wrong_types_and_unknown_fields_are_listed_with_the_missing_ones(tmp_path, table):
    table["budget"]["rollouts"] = "many"
    table["budget"]["dollars"] = 5
    table["eval_set"]["splits"][0]["role"] = "holdout"
    table["failure_cost"]["canary_policy"] = "yolo"
    del table["serial_baseline"]["version"]
    with pytest.raises(CardError) as caught:
        load_card(write_card(tmp_path / "c.toml", table))
    assert caught.value.missing == ["serial_baseline.version"]
    assert [p.split(":")[0] for p in caught.value.invalid] == [
        "budget.dollars", "budget.rollouts", "eval_set.splits[0].role", "failure_cost.canary_policy"]


def test_unknown_is_accepted_only_where_diagnose_fills_it(tmp_path, table):
    table["serial_baseline"]["converged_score"] = 0.81
    table["serial_baseline"]["rollouts_to_converge"] = 400
    assert load_card(write_card(tmp_path / "a.toml", table)).serial_baseline.converged_score == 0.81
    table["budget"]["rollouts"] = "unknown"
    with pytest.raises(CardError, match=r"budget.rollouts: Expected `int`, got `str`"):
        load_card(write_card(tmp_path / "b.toml", table))


def test_a_changed_hash_is_refused_naming_both_hashes(tmp_path, table):
    table["eval_set"]["splits"][2]["sha256"] = "0" * 64
    with pytest.raises(CardError, match=r"splits\[2\] \(test\): the card pins 100 rows sha256 0{64}, the data has "
                                        r"100 rows sha256 3ac33fda"):
        load_card(write_card(tmp_path / "c.toml", table))


def test_selecting_on_data_that_overlaps_the_test_split_is_refused(tmp_path, table):
    from combee_fast.tasks.formula import FormulaTask

    val = FormulaTask().load("val").manifest
    table["eval_set"]["splits"][1].update(name="val", rows=val.rows, sha256=val.sha256)
    with pytest.raises(CardError, match="selection split 'val' shares 100 examples with test split 'test'"):
        load_card(write_card(tmp_path / "c.toml", table))


def test_calling_the_task_test_split_anything_else_is_refused(tmp_path, table):
    splits = table["eval_set"]["splits"]
    splits[1]["name"], splits[1]["role"] = "test", "selection"
    splits[2]["name"], splits[2]["role"] = "selection", "test"
    splits[1]["rows"], splits[2]["rows"] = splits[2]["rows"], splits[1]["rows"]
    splits[1]["sha256"], splits[2]["sha256"] = splits[2]["sha256"], splits[1]["sha256"]
    with pytest.raises(CardError, match="declares this split test; it cannot be selection"):
        load_card(write_card(tmp_path / "c.toml", table))


def test_inconsistent_hardware_budget_and_roles_are_all_listed(tmp_path, table):
    table["hardware"][0]["endpoints"] = {"default": {"url": "http://127.0.0.1:9/v1", "model": "m"}}
    table["hardware"][1]["sim_preset"] = "tpu-pod"
    table["budget"]["tokens"] = 0
    table["eval_set"]["splits"][0]["role"] = "selection"
    with pytest.raises(CardError) as caught:
        load_card(write_card(tmp_path / "c.toml", table))
    invalid = caught.value.invalid
    assert caught.value.missing == []
    assert any("hardware[0] (h200): give exactly one of sim_preset or endpoints" in p for p in invalid)
    assert any("unknown sim_preset 'tpu-pod'" in p for p in invalid)
    assert any("budget.tokens must be > 0" in p for p in invalid)
    assert any("need exactly one split of role train, got 0" in p for p in invalid)


def test_an_endpoint_set_is_a_hardware_class(tmp_path, table):
    del table["hardware"][0]["sim_preset"]
    table["hardware"][0]["endpoints"] = {"default": {"url": "http://gpu1:8000/v1", "model": "llama"}}
    card = load_card(write_card(tmp_path / "c.toml", table))
    assert card.hardware[0].endpoints["default"].model == "llama"
    assert "endpoints default=http://gpu1:8000/v1" in card_summary(card)[3]


def test_field_problems_of_an_empty_table_name_every_required_field():
    missing, invalid = field_problems({}, Card)
    assert invalid == [] and len(missing) == 33 and "task.options" not in missing


def test_a_card_may_name_an_external_test_file_and_its_overlap_is_checked(tmp_path, table):
    from combee_fast.tasks.ace_format import DATA_DIR
    from combee_fast.tasks.formula import FORMULA_FILES, FormulaTask

    held_out = tmp_path / "heldout.jsonl"
    held_out.write_bytes(b"\n".join((DATA_DIR / FORMULA_FILES["val"]).read_bytes().splitlines()[240:300]) + b"\n")
    manifest = FormulaTask(test_file=str(held_out)).load("test").manifest
    table["task"]["options"] = {"test_file": str(held_out)}
    table["eval_set"]["splits"][2].update(rows=60, sha256=manifest.sha256)
    card = load_card(write_card(tmp_path / "c.toml", table))
    assert card.task.options == {"test_file": str(held_out)} and card.eval_set.splits[2].rows == 60
    leaked = tmp_path / "leaked.jsonl"
    leaked.write_bytes(b"\n".join((DATA_DIR / FORMULA_FILES["train"]).read_bytes().splitlines()[:5]) + b"\n")
    table["task"]["options"] = {"test_file": str(leaked)}
    table["eval_set"]["splits"][2].update(rows=5, sha256=FormulaTask(test_file=str(leaked)).load("test").manifest.sha256)
    with pytest.raises(CardError, match="train split 'train' shares 5 examples with test split 'test'"):
        load_card(write_card(tmp_path / "d.toml", table))


def test_a_run_finds_the_hardware_class_it_runs_on(tmp_path, table):
    from combee_fast.config import EndpointSpec, SessionConfig, SimConfig
    from combee_fast.verify.discipline import learn_under_card

    card = load_card(CARD)
    assert card.hardware_for(SessionConfig(sim=SimConfig("h200-70b"))).name == "h200"
    assert card.hardware_for(SessionConfig(sim=SimConfig("hosted-api"))).name == "hosted"
    assert card.hardware_for(SessionConfig(sim=SimConfig("flat"))) is None
    real = {"default": EndpointSpec("http://gpu1:8000/v1", "llama")}
    assert card.hardware_for(SessionConfig(endpoints=real)) is None
    del table["hardware"][0]["sim_preset"]
    table["hardware"][0]["endpoints"] = {"default": {"url": "http://gpu1:8000/v1", "model": "llama"},
                                         "generator": {"url": "http://gpu2:8000/v1", "model": "small"}}
    (tmp_path / "cards").mkdir()
    written = write_card(tmp_path / "cards" / "c.toml", table)
    split = load_card(written)
    assert split.hardware_for(SessionConfig(endpoints=real)) is None  # the generator runs elsewhere
    both = {**real, "generator": EndpointSpec("http://gpu2:8000/v1", "small")}
    assert split.hardware_for(SessionConfig(endpoints=both)).gpu_count == 8
    run = learn_under_card(written, SessionConfig(endpoints=both, task=msgspec.structs.replace(
        SessionConfig().task, train_split="train", val_split="selection")), run="runs/x")
    assert run.gpus == 8 and run.usage.roles["test"] == "test" and run.usage.record == str(usage_path(written))
    assert not list((tmp_path / "cards").glob("*.usage.json"))  # nothing beside the card


def _leaf_paths(table: dict, prefix: str = "") -> list[tuple[str, tuple]]:
    """(printed path, key path) of every scalar field of a card table (options excluded)."""
    found: list[tuple[str, tuple]] = []
    for key, value in table.items():
        where = f"{prefix}{'.' if prefix else ''}{key}"
        if key == "options":
            continue
        if isinstance(value, dict):
            found += [(p, (key, *k)) for p, k in _leaf_paths(value, where)]
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for index, item in enumerate(value):
                found += [(p, (key, index, *k)) for p, k in _leaf_paths(item, f"{where}[{index}]")]
        else:
            found.append((where, (key,)))
    return found


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_set_of_deleted_fields_is_reported_exactly(data, table) -> None:
    import copy

    card = copy.deepcopy(table)
    leaves = _leaf_paths(card)
    chosen = data.draw(st.lists(st.sampled_from(leaves), unique=True, max_size=12))
    for _, keys in chosen:
        holder = card
        for key in keys[:-1]:
            holder = holder[key]
        del holder[keys[-1]]
    missing, invalid = field_problems(card, Card)
    expected = {path.replace(".sim_preset", ".sim_preset|endpoints") for path, _ in chosen}
    assert invalid == [] and set(missing) == expected and len(missing) == len(expected)


def test_an_infinite_or_nan_speedup_claim_is_refused(tmp_path, table):
    """A card claiming speedup = inf passed (issue 53): no run confirms an infinite speedup."""
    for claimed in (float("inf"), float("nan")):
        table["claim"]["speedup"] = claimed
        with pytest.raises(CardError) as caught:
            load_card(write_card(tmp_path / "c.toml", table))
        assert f"claim.speedup must be a finite number > 0, got {claimed}" in caught.value.invalid
