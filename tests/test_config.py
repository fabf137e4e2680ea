"""The config tree: TOML and JSON files, flags over them, the run's config.json round trip, and the
library taking the CLI's path for ``batch_size=None`` (the controller)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import msgspec
import pytest

from combee_fast.cli import build_parser
from combee_fast.config import (
    OnlineConfig,
    SessionConfig,
    SimConfig,
    TaskConfig,
    TrainConfig,
    VerifyConfig,
    config_to_dict,
    load_config,
)
from combee_fast.errors import ConfigError
from combee_fast.flags import session_config
from combee_fast.gepa.settings import GepaConfig, PipelineConfig, settings
from combee_fast.record.rundir import RunDir
from combee_fast.session import open_session

RUN_TOML = """\
method = "naive"
seed = 3

[task]
train_split = "train[0:20]"
val_split = "val[0:10]"

[train]
batch_size = 10

[combee]
max_group = 16

[sim]
preset = "flat"
time_scale = 0.0001
"""


def test_a_toml_file_describes_a_run_and_missing_fields_keep_their_defaults(tmp_path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(RUN_TOML)
    config = load_config(path)
    assert (config.method, config.seed, config.train.batch_size, config.combee.max_group) == ("naive", 3, 10, 16)
    assert config.combee.duplicates == SessionConfig().combee.duplicates
    assert config.map == SessionConfig().map


def test_an_unknown_or_mistyped_field_is_refused_naming_it(tmp_path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[combee]\nmax_groop = 4\n')
    with pytest.raises(ConfigError, match=r"bad.toml.*max_groop"):
        load_config(path)
    path.write_text('[train]\nbatch_size = "big"\n')
    with pytest.raises(ConfigError, match=r"batch_size"):
        load_config(path)
    path.write_text('[train]\nepochs = 0\n')
    with pytest.raises(ConfigError, match=r"train.epochs must be >= 1"):
        load_config(path)


def test_a_seed_outside_64_bits_or_a_nan_is_one_line_and_exit_2(tmp_path) -> None:
    """A seed below 0 or past 2**63 - 1 (numpy refuses the one, the checkpoint cannot store the
    other: both ended in a traceback, exit 1) and a NaN where a number is bounded below (stored
    as null) are refused before anything runs, naming the field, from a flag and from a file."""
    for seed in ("-1", str(2**70)):
        done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", "--train-split", "train[0:4]",
                               f"--seed={seed}", "--out", str(tmp_path / "run"), "--quiet"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip().splitlines()[-1] == (
            f"combee learn: error: command line: session.seed must be a whole number from 0 to 2**63 - 1, got {seed}")
    assert not (tmp_path / "run").exists()
    path = tmp_path / "nan.toml"
    path.write_text("[sampling.default]\ntemperature = nan\n")
    with pytest.raises(ConfigError, match=r"nan.toml: sampling.temperature must be >= 0, got nan"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"verify.seeds\[2\] must be a whole number from 0 to 2\*\*63 - 1, got -2"):
        VerifyConfig(seeds=(0, 1, -2))
    with pytest.raises(ConfigError, match=r"online.seed must be a whole number"):
        OnlineConfig(seed=2**63)


def test_a_bad_flag_value_is_blamed_on_the_command_line_and_a_bad_file_on_the_file(tmp_path) -> None:
    """A flag's bad value was reported as the --config file's ("ok.toml: session.seed must be ...")."""
    (good := tmp_path / "ok.toml").write_text("[train]\nbatch_size = 4\n")
    (bad := tmp_path / "bad.toml").write_text("[train]\nbatch_size = 0\n")
    with pytest.raises(ConfigError, match=rf"^command line \(over {re.escape(str(good))}\): session.seed must be"):
        session_config(build_parser().parse_args(["learn", "--config", str(good), "--seed=-1"]))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(bad))}: train.batch_size must be >= 1"):
        session_config(build_parser().parse_args(["learn", "--config", str(bad), "--seed", "3"]))


def test_a_local_server_flag_without_local_is_refused_not_ignored(tmp_path) -> None:
    """--local-model (or --local-threads, --local-slots) without --local ran on the simulated
    endpoint, exit 0, the model never started: now one line and exit 2, nothing made; with a
    [local] table in the config file the flags apply to it."""
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", "--local-model", str(tmp_path / "m.gguf"),
                           "--local-slots", "2", "--train-split", "train[0:4]", "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not out.exists()
    assert done.stderr.strip().splitlines()[-1] == (
        "combee learn: error: --local-model, --local-slots given without --local (nor a [local] table in the "
        "config): the run would not start that server; add --local")
    (config := tmp_path / "local.toml").write_text("[local]\nslots = 3\n")
    args = build_parser().parse_args(["learn", "--config", str(config), "--local-threads", "1"])
    local = session_config(args).local
    assert local is not None and (local.slots, local.threads) == (3, 1)


def test_flags_override_the_file_and_config_json_round_trips(tmp_path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(RUN_TOML)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", "learn", "--config", str(path), "--batch-size", "5",
         "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stderr
    recorded = load_config(out / "config.json")
    assert recorded.train.batch_size == 5  # the flag won
    assert recorded.method == "naive" and recorded.combee.max_group == 16  # the file's values stayed
    assert msgspec.structs.replace(load_config(path), train=TrainConfig(batch_size=5)) == recorded
    assert json.loads((out / "config.json").read_text()) == json.loads(msgspec.json.encode(config_to_dict(recorded)))


async def test_the_library_runs_the_controller_when_batch_size_is_none(tmp_path) -> None:
    """``TrainConfig(batch_size=None)`` must plan with the controller, as ``--batch-size auto``
    does, and log its decisions (it once silently ran batch size 1)."""
    config = SessionConfig(
        task=TaskConfig(train_split="train[0:200]", val_split="val[0:10]"),
        train=TrainConfig(batch_size=None), sim=SimConfig("flat", 1e-4),
    )
    run_dir = RunDir(tmp_path)
    async with open_session(config) as session:
        result = await session.train(run_dir=run_dir)
    run_dir.close()
    decisions = [json.loads(line) for line in (tmp_path / "controller.jsonl").read_text().splitlines()]
    reasons = [d["reason"] for d in decisions]
    assert reasons[0].startswith("start: nothing measured yet") and len(decisions) >= 2
    assert [row.batch_reason for row in result.ledger][: len(reasons)] == reasons
    assert [row.batch_size for row in result.ledger][: len(decisions)] == [d["batch_size"] for d in decisions]
    assert decisions[0]["batch_size"] == 100  # half of the 200 waiting items: a real step, no trial
    assert result.samples == 200


def test_a_toml_config_asks_for_the_controller_with_batch_size_auto(tmp_path) -> None:
    path = tmp_path / "auto.toml"
    path.write_text(RUN_TOML.replace('method = "naive"', 'method = "combee"').replace("batch_size = 10", 'batch_size = "auto"')
                    .replace('train_split = "train[0:20]"', 'train_split = "train[0:120]"'))
    assert load_config(path).train.batch_size is None
    json_path = tmp_path / "auto.json"
    json_path.write_text('{"train": {"batch_size": "auto"}}')
    assert load_config(json_path).train.batch_size is None
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", "--config", str(path), "--out", str(out),
                           "--quiet"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    decisions = [json.loads(line) for line in (out / "controller.jsonl").read_text().splitlines()]
    rows = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    assert decisions and decisions[0]["reason"].startswith("start: nothing measured yet")
    assert [row["batch_reason"] for row in rows][: len(decisions)] == [d["reason"] for d in decisions]
    assert load_config(out / "config.json").train.batch_size is None  # the run's record asks for it again
    path.write_text('[train]\nbatch_size = "sometimes"\n')
    with pytest.raises(ConfigError, match="batch_size"):
        load_config(path)


def test_each_knob_has_one_meaning_and_defaults_keep_todays_values() -> None:
    config = SessionConfig()
    assert config.map.workers == config.transport.concurrency == config.eval.parallel == config.controller.max_batch
    gepa = settings(config)  # GEPA's, read from its section (none here: its defaults)
    assert gepa.combee_minibatch == config.train.batch_size and gepa.minibatch == 3
    changed = msgspec.structs.replace(config, map=msgspec.structs.replace(config.map, workers=4))
    assert changed.transport.concurrency == 256 and changed.eval.parallel == 256


def test_a_config_or_card_nested_too_deeply_is_one_line(tmp_path) -> None:
    """A deeply nested TOML or JSON config, or card, ended in a RecursionError traceback (issue 53)."""
    from combee_fast.verify.card import read_card_table

    (deep_toml := tmp_path / "deep.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    (deep_json := tmp_path / "deep.json").write_text('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    for path in (deep_toml, deep_json):
        with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: not a readable config file: its values are "
                                              "nested too deeply$"):
            load_config(path)
    with pytest.raises(ConfigError, match=r"^card .*deep.toml: not a readable TOML file: its values are nested too"):
        read_card_table(deep_toml)
