"""Every role's schema is a grammar a model cannot loop in: bounded strings and arrays, enumerated ids."""

from __future__ import annotations

from typing import Any

import pytest

from combee_fast.config import FaultConfig
from combee_fast.endpoint.calls import ChatRequest
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.ace.generator import GENERATOR_SCHEMA, generator_schema
from combee_fast.ace.ops import OPS_SCHEMA, ops_schema
from combee_fast.ace.reducer import REDUCER_SCHEMA, reducer_schema
from combee_fast.ace.reflector import REFLECTOR_SCHEMA, reflector_schema
from combee_fast.schema import Message
from combee_fast.ace.records import Op, OpKind
from tests.conftest import StartSimServer

ADD = Op(OpKind.ADD, "formulas", "ROI = gain / cost")
PLAYBOOK = "## formulas\n[form-00001] helpful=2 harmful=0 :: use NPV\n[form-00002] helpful=0 harmful=1 :: x\n"


def _unbounded(schema: dict[str, Any], where: str = "$") -> list[str]:
    found = []
    kind = schema.get("type")
    if kind == "string" and "maxLength" not in schema and "enum" not in schema:
        found.append(where)
    if kind == "array":
        if "maxItems" not in schema:
            found.append(where)
        found += _unbounded(schema.get("items", {}), where + "[]")
    for name, sub in schema.get("properties", {}).items():
        found += _unbounded(sub, f"{where}.{name}")
    for index, branch in enumerate(schema.get("anyOf", ())):
        found += _unbounded(branch, f"{where}|{index}")
    return found


@pytest.mark.parametrize("schema", [
    GENERATOR_SCHEMA, REFLECTOR_SCHEMA, OPS_SCHEMA, REDUCER_SCHEMA, generator_schema(PLAYBOOK),
    generator_schema(""), reflector_schema(["form-00001"]), reflector_schema([]),
    ops_schema(OPS_SCHEMA, PLAYBOOK), ops_schema(REDUCER_SCHEMA, PLAYBOOK), ops_schema(OPS_SCHEMA, ""),
    ops_schema(OPS_SCHEMA, "", must_add=True), reducer_schema(PLAYBOOK, []), reducer_schema("", [[ADD], [ADD, ADD]]),
])
def test_every_string_and_array_is_bounded(schema: dict[str, Any]) -> None:
    assert _unbounded(schema) == []


def test_ids_are_those_in_the_prompt() -> None:
    assert generator_schema(PLAYBOOK)["properties"]["bullet_ids"]["items"]["enum"] == ["form-00001", "form-00002"]
    assert generator_schema("")["properties"]["bullet_ids"]["maxItems"] == 0  # nothing to cite
    tags = reflector_schema(["form-00002"])["properties"]["bullet_tags"]
    assert tags["items"]["properties"]["id"]["enum"] == ["form-00002"]
    assert reflector_schema([])["properties"]["bullet_tags"]["maxItems"] == 0
    for schema in (OPS_SCHEMA, REDUCER_SCHEMA):  # each kind names the ids it may: an ADD none, an edit one shown
        add, edit = (shape["properties"] for shape in ops_schema(schema, PLAYBOOK)["properties"]["operations"]["items"]["anyOf"])
        assert add["type"]["enum"] == ["ADD"] and add["bullet_id"]["enum"] == [""]
        assert edit["type"]["enum"] == ["UPDATE", "REMOVE"] and edit["bullet_id"]["enum"] == ["form-00001", "form-00002"]
        empty = ops_schema(schema, "")["properties"]["operations"]["items"]["properties"]  # nothing to UPDATE or REMOVE
        assert empty["type"]["enum"] == ["ADD"] and empty["bullet_id"]["enum"] == [""]
    # must_add: at least one ADD, only where the playbook is empty (the curator of a reflection that says something)
    assert ops_schema(OPS_SCHEMA, "", must_add=True)["properties"]["operations"]["minItems"] == 1
    assert "minItems" not in ops_schema(OPS_SCHEMA, "")["properties"]["operations"]
    assert "minItems" not in ops_schema(OPS_SCHEMA, PLAYBOOK, must_add=True)["properties"]["operations"]
    assert "minItems" not in OPS_SCHEMA["properties"]["operations"]
    assert OPS_SCHEMA["properties"]["operations"]["items"]["properties"]["type"]["enum"] == ["ADD", "UPDATE", "REMOVE"]
    assert "enum" not in GENERATOR_SCHEMA["properties"]["bullet_ids"]["items"]  # the shared schema is untouched
    assert "enum" not in OPS_SCHEMA["properties"]["operations"]["items"]["properties"]["bullet_id"]


def test_a_reduction_keeps_only_the_references_it_was_shown_and_something_of_an_empty_playbooks() -> None:
    edit = Op(OpKind.UPDATE, "formulas", "NPV = sum of discounted flows", "form-00001")
    tag = Op(OpKind.TAG, bullet_id="form-00001", helpful=1)  # not shown to the reducer: no reference
    keep = reducer_schema(PLAYBOOK, [[edit, tag], [ADD]])["properties"]["keep"]
    assert keep["items"]["enum"] == ["P1.1", "P2.1"] and keep["maxItems"] == 2 and "minItems" not in keep
    assert reducer_schema(PLAYBOOK, [])["properties"]["keep"]["maxItems"] == 0  # nothing to keep
    empty = reducer_schema("", [[ADD], [ADD, ADD]])
    assert empty["properties"]["keep"]["minItems"] == 1  # every lesson is new: keep one at least
    assert empty["properties"]["operations"]["items"]["properties"]["type"]["enum"] == ["ADD"]
    assert "minItems" not in reducer_schema("", [])["properties"]["keep"]  # no ADD proposed: nothing to keep
    assert REDUCER_SCHEMA["properties"]["keep"] == {"type": "array", "items": {"type": "string", "maxLength": 40},
                                                    "maxItems": 64}  # the template is untouched


async def test_a_truncated_structured_reply_is_reported_not_sent_again(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(time_scale=0.001, faults=FaultConfig(rate_truncated=1.0))
    request = ChatRequest(role="r", messages=(Message(role="user", content="a long question " * 20),),
                          json_schema={"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
    async with EndpointClient(EndpointConfig(name="e", base_url=server.url, model="m")) as client:
        result = await client.chat(request)
    assert result.error is not None and result.error.kind == "truncated" and "not repaired" in result.error.message
    assert result.error.raw and server.counters().requests == 1
