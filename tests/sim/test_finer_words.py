"""The FiNER world speaks FiNER: a short learn run on the simulated endpoint writes lessons about
tagging into the playbook and tagging prose into the replies, never Formula's words; the server
of every bundled world answers a FiNER curator prompt as the FiNER world alone does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from combee_fast.ace.curator import curator_messages
from combee_fast.learners import role_table
from combee_fast.schema import Usage
from combee_fast.ace.records import Reflection
from combee_fast.sim.responders import SimRequest
from combee_fast.sim.world import lesson_unit
from combee_fast.sim.worlds import bundled_worlds, task_world
from combee_fast.tasks.registry import get_task

FORMULA_WORDS = ("formula", "substitut", "annualis")


def _formula_words(text: str) -> list[str]:
    return [word for word in FORMULA_WORDS if word in text.lower()]


def test_a_finer_run_learns_tagging_lessons_and_no_formula_words(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "combee_fast.cli", "learn", "--task", "finer",
                           "--train-split", "train[0:20]", "--val-split", "selection[0:10]",
                           "--time-scale", "0.0001", "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    bullets = json.loads((out / "final.json").read_text())["bullets"]
    tags = {tag for example in get_task("finer").load("train").examples for tag in example.meta["tags"].split(",")}
    tag_lessons = [bullet["content"] for bullet in bullets if lesson_unit(bullet["content"]) in tags]
    assert tag_lessons and all(" tag" in lesson.split(": ", 1)[1] for lesson in tag_lessons), tag_lessons
    for bullet in bullets:
        assert not _formula_words(bullet["section"] + " " + bullet["content"]), bullet
    replies = (out / "replies.jsonl").read_text()
    assert not _formula_words(replies), _formula_words(replies)


def test_the_bundled_server_answers_a_finer_curator_prompt_in_the_finer_worlds_words() -> None:
    finer = task_world(get_task("finer"), role_table())
    lesson = finer.named_lesson("Revenues", True, "a question", 0)
    reflection = Reflection("r", "", "", "", "", lesson, (), Usage())
    request = SimRequest(role="curator", model="sim", messages=curator_messages("", "", [reflection]),
                         max_tokens=1024, temperature=0.0, seed=7, json_schema=None)
    worlds = bundled_worlds(role_table())
    assert worlds.world_for(request).task.name == "finer"
    reply = worlds.respond(request)
    assert isinstance(reply, str) and reply == finer.respond(request)
    assert lesson in reply and not _formula_words(reply), reply
