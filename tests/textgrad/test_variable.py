"""The prompt variable: line edits applied at once, versions, files, and which learner a file is."""

from __future__ import annotations

import pytest

from combee_fast.errors import ConfigError
from combee_fast.gepa.candidate import Candidate
from combee_fast.learners import kind_of_file
from combee_fast.ace.playbook import Playbook
from combee_fast.textgrad.variable import SYSTEM_PROMPT, LineEdit, PromptVariable, is_variable_file


def test_edits_remove_then_add_each_line_once_and_number_the_new_version() -> None:
    base = PromptVariable({SYSTEM_PROMPT: "first\nsecond"})
    edits = [LineEdit(SYSTEM_PROMPT, "third"), LineEdit(SYSTEM_PROMPT, "first", remove=True),
             LineEdit(SYSTEM_PROMPT, "third"), LineEdit(SYSTEM_PROMPT, "  "), LineEdit("other", "x"),
             LineEdit(SYSTEM_PROMPT, "gone", remove=True), LineEdit(SYSTEM_PROMPT, "two\nlines")]
    variable, change, delta = base.edited(edits, "step[0]")
    assert variable.parts == {SYSTEM_PROMPT: "second\nthird"} and variable.version == 1
    assert change.added_ids == ("third",) and change.evicted == ("first",)
    assert change.rejected == ("gone", "third", "  ", "x", "two\nlines")
    assert delta is not None and delta.version == 1 and delta.source == "step[0]"
    assert delta.added == ((SYSTEM_PROMPT, "third"),) and delta.removed == ((SYSTEM_PROMPT, "first"),)
    same, unchanged, none = variable.edited([LineEdit(SYSTEM_PROMPT, "second")], "step[1]")
    assert same is variable and none is None and unchanged.rejected == ("second",)


def test_parts_render_under_headers_and_lines_are_numbered_in_part_order() -> None:
    variable = PromptVariable({"b": "two\n\nthree", "a": "one"})
    assert variable.render() == "## a\none\n\n## b\ntwo\n\nthree"
    assert variable.lines() == [("a", "one"), ("b", "two"), ("b", "three")] and len(variable) == 3
    assert PromptVariable.seed().render() == PromptVariable.seed().parts[SYSTEM_PROMPT]


def test_a_variable_file_is_saved_loaded_and_told_apart_from_other_learners_files(tmp_path) -> None:
    path = tmp_path / "final.json"
    variable, _, _ = PromptVariable.seed().edited([LineEdit(SYSTEM_PROMPT, "a lesson")], "s")
    variable.save(path)
    assert PromptVariable.load(path) == variable and is_variable_file(path)
    kind, loaded = kind_of_file(path)
    assert kind.name == "textgrad" and loaded == variable
    Candidate.seed().save(tmp_path / "candidate.json")
    Playbook.empty().save(tmp_path / "playbook.json")
    assert kind_of_file(tmp_path / "candidate.json")[0].name == "gepa"
    assert kind_of_file(tmp_path / "playbook.json")[0].name == "ace"
    assert not is_variable_file(tmp_path / "candidate.json")


def test_an_unreadable_variable_file_is_named(tmp_path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"parts": {"system_prompt": 3}}')
    with pytest.raises(ConfigError, match="bad.json: not a prompt-variable file"):
        PromptVariable.load(path)
    path.write_text('{"parts": {}}')
    with pytest.raises(ConfigError, match="at least one part"):
        PromptVariable.load(path)
