"""A learner's own settings live in its section (``[learners.gepa]``); the ``[gepa]`` table of
files written before learners had sections is read as it: an old-style config loads and means
the same, and a run folder stored by the code before the change (``tests/data/gepa-run-before-
learner-sections``: a GEPA run stopped by SIGINT after step 4, and the ``final.json`` of the same
run left uninterrupted, both made by that code) resumes to the same ``final.json`` and ``combee
show`` reads it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from combee_fast.cli import build_parser
from combee_fast.config import SessionConfig, config_to_dict, load_config
from combee_fast.errors import EXIT_OK, ConfigError
from combee_fast.flags import session_config
from combee_fast.gepa.settings import GepaConfig, PipelineConfig, settings
from combee_fast.learners import LEARNERS, settled

STORED = Path(__file__).parent.parent / "data" / "gepa-run-before-learner-sections"

OLD = """method = "async-gepa"

[gepa]
max_metric_calls = 120
combee_minibatch = "auto"

[gepa.pipeline]
proposals = 2
"""


def _combee(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", *args], capture_output=True, text=True,
                          timeout=300)


def test_an_old_style_gepa_table_loads_and_means_the_same_as_its_section(tmp_path: Path) -> None:
    (old := tmp_path / "old.toml").write_text(OLD)
    (new := tmp_path / "new.toml").write_text(OLD.replace("[gepa]", "[learners.gepa]")
                                              .replace("[gepa.pipeline]", "[learners.gepa.pipeline]"))
    assert load_config(old) == load_config(new)
    expected = GepaConfig(max_metric_calls=120, combee_minibatch=None, pipeline=PipelineConfig(proposals=2))
    assert settings(load_config(old)) == settings(load_config(new)) == expected
    # a flag over the old table: both apply, and the run's record has the section whole
    args = build_parser(["learn"]).parse_args(["learn", "--config", str(old), "--minibatch", "5"])
    config = session_config(args)
    assert settings(config) == GepaConfig(minibatch=5, max_metric_calls=120, combee_minibatch=None,
                                          pipeline=PipelineConfig(proposals=2))
    assert config_to_dict(config)["learners"]["gepa"]["pipeline"]["grade"] == PipelineConfig().grade
    # the config.json the code before wrote (every session field, GEPA's under "gepa") reads the same
    stored = load_config(STORED / "run" / "config.json")
    assert "gepa" in json.loads((STORED / "run" / "config.json").read_text())
    assert settings(stored).max_metric_calls == 300 and stored.method == "gepa"
    assert settled(stored, LEARNERS.load("gepa")) == stored  # already whole: nothing added


def test_a_section_given_twice_or_naming_no_learner_or_not_decoding_is_one_error(tmp_path: Path) -> None:
    (both := tmp_path / "both.toml").write_text(OLD + "\n[learners.gepa]\nminibatch = 4\n")
    with pytest.raises(ConfigError, match=r"both.toml: learner 'gepa'.s settings are given twice"):
        load_config(both)
    (typo := tmp_path / "typo.toml").write_text("[trian]\nepochs = 1\n")
    with pytest.raises(ConfigError, match=r"typo.toml: learners.trian: no learner is named 'trian'"):
        session_config(build_parser(["learn"]).parse_args(["learn", "--config", str(typo)]))
    (bad := tmp_path / "bad.toml").write_text("[gepa]\nminibatch = 0\n")
    with pytest.raises(ConfigError, match=r"bad.toml: learners.gepa: .*gepa.minibatch must be >= 1"):
        session_config(build_parser(["learn"]).parse_args(["learn", "--config", str(bad)]))
    (ace := tmp_path / "ace.toml").write_text("[learners.ace]\nx = 1\n")
    with pytest.raises(ConfigError, match=r"learners.ace: learner 'ace' has no settings of its own"):
        settled(load_config(ace))
    with pytest.raises(ConfigError, match=r"learners.gepa: .*minibatch"):
        settings(SessionConfig(learners={"gepa": {"minibatch": "three"}}))


@pytest.mark.slow
def test_a_run_folder_stored_before_the_change_resumes_to_the_same_final_json_and_shows(tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(STORED / "run", out)
    shown = _combee("show", str(out))
    assert shown.returncode == EXIT_OK and shown.stdout.strip() == (out / "prompt.txt").read_text().strip(), shown.stderr
    resumed = _combee("learn", "--resume", str(out), "--quiet")
    assert resumed.returncode == EXIT_OK, resumed.stderr
    assert (out / "final.json").read_bytes() == (STORED / "uninterrupted-final.json").read_bytes()
    assert _combee("show", str(out), "--report").returncode == EXIT_OK
