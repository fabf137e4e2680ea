"""Issue 35, finding 17: the demo made faster without changing what it computes.

The simulated world's hot text helpers read tags and lesson units by string search instead of a
regular expression, and a request's schema copies only the path it changes: each must give what
the regular expression (or the deep copy) gave, and the demo's learned playbooks are pinned."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import random
import re
from pathlib import Path

from combee_fast.ace.generator import GENERATOR_SCHEMA
from combee_fast.ace.ops import OPS_SCHEMA
from combee_fast.ace.reflector import REFLECTOR_SCHEMA, reflector_schema
from combee_fast.demo import run_demo
from combee_fast.roles import bounds
from combee_fast.sim.world import lesson_unit, tagged

DEMO_40 = {  # sha256 of each final playbook of `combee demo --train-limit 40`, as before the change
    "sequential": "a5d745455f62b5c9cbf8b3bfc75cee7a2a290588fb19352e2a60e2a3b7524cbc",
    "naive": "bda2dca392ff4b023c1280084a193a96466a3b54c2afda3023ef5f8b32e9e33d",
    "combee": "2e3abceec2c2acc3a517186af6800f3ae03e6aef4fd5f7cb4f5b303e966f0fb5",
}


def _texts(count: int) -> list[str]:
    pieces = ["a", " ", "\n", " — ", "—", "<q>", "</q>", "<q>\n", "\n</q>", "x", "\r", "<qq>", "[id]"]
    draw = random.Random(35)
    return ["".join(draw.choice(pieces) for _ in range(draw.randrange(0, 12))) for _ in range(count)]


def test_tags_and_lesson_units_are_read_as_the_regular_expressions_read_them() -> None:
    unit, tag = re.compile(r"^(.+?) — "), re.compile(r"<q>\n(.*?)\n?</q>", re.DOTALL)
    for text in _texts(100_000) + ["Current Ratio — lesson 3: x", "General — lesson 1: y — z", "<q>\nA\n</q>"]:
        assert lesson_unit(text) == ((m := unit.match(text)) and m[1]), repr(text)
        assert tagged(text, "q") == ((m := tag.search(text)) and m[1]), repr(text)


def _deep(schema: dict, path: tuple[str, ...], ids: tuple[str, ...]) -> dict:
    """What ``with_ids`` gave when it deep-copied the whole schema."""
    result = copy.deepcopy(schema)
    node = result
    for key in path[:-1]:
        node = node["items"] if key == "*" else node["properties"][key]
    if path[-1] == "*":
        if not ids:
            node["maxItems"] = 0
        node["items"] = bounds.id_schema(ids)
    else:
        node["properties"][path[-1]] = bounds.id_schema(ids)
    return result


def test_a_schema_with_ids_is_the_deep_copys_and_leaves_its_template_alone() -> None:
    cases = [(REFLECTOR_SCHEMA, ("bullet_tags", "*", "id")), (GENERATOR_SCHEMA, ("bullet_ids", "*")),
             (OPS_SCHEMA, ("operations", "*", "bullet_id"))]
    templates = json.dumps([schema for schema, _ in cases])
    for schema, path in cases:
        for ids in ((), ("a",), ("a", "b", "a"), ("a", "")):
            made = bounds.with_ids(schema, path, ids)
            assert json.dumps(made) == json.dumps(_deep(schema, path, ids))
    assert reflector_schema(())["properties"]["bullet_tags"]["maxItems"] == 0
    assert json.dumps([schema for schema, _ in cases]) == templates


async def test_the_demo_learns_the_playbooks_it_learned_before(tmp_path: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        results = await run_demo(train_limit=40, out=tmp_path / "demo")
    assert {method: hashlib.sha256(result.final.to_bytes()).hexdigest() for method, _, result, _ in results} == DEMO_40
