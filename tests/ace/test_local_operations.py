"""The curator's and reducer's schemas as the real local llama.cpp server decodes them. An UPDATE
or a REMOVE names one of the playbook's ids even when the model is told to leave the id empty
(the 0.5B, under the schema that let every kind take ``""`` or an id, answered a curator request
with ADD, UPDATE ``""``, REMOVE ``""``: two edits the playbook refused as ``missing bullet_id``).
A reduction of an empty playbook's proposals keeps at least one of them (the 0.5B, under the old
prompt and schema, kept none of the 33 ADDs its curators proposed in a Combee run).

Needs the ``local`` extra (xllamacpp and the default local model); skipped, saying so, otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

from combee_fast.ace import curator, reducer
from combee_fast.ace.curator import parse_curator
from combee_fast.ace.ops import ops_schema
from combee_fast.config import LocalConfig
from combee_fast.endpoint.calls import ChatRequest
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.endpoint.local import LocalServer
from combee_fast.ace.playbook.format import ids_in
from combee_fast.schema import Message, Usage
from combee_fast.ace.records import OpKind, Reflection
from tests.local_models import LOCAL_MODEL_MARKS, THREADS

pytestmark = LOCAL_MODEL_MARKS

PLAYBOOK = ("## formulas\n[form-00001] helpful=0 harmful=2 :: Sharpe Ratio = R_p - R_f / sigma_p\n"
            "[form-00002] helpful=1 harmful=0 :: Gross Profit Margin = (Revenue - COGS) / Revenue\n")
REFLECTION = Reflection(
    "r0", "", "The answer used R_p - R_f / sigma_p for the Sharpe ratio, dividing only R_f by sigma.",
    "Bullet form-00001 writes the Sharpe ratio without parentheses.", "Sharpe Ratio = (R_p - R_f) / sigma_p.",
    "Subtract the risk-free rate before dividing by the standard deviation.", (), Usage(0, 0))


EMPTY_ID_EDIT = ('Reply with exactly this JSON and nothing else: {"reasoning": "fix it", "operations": '
                 '[{"type": "UPDATE", "section": "formulas", "content": "Sharpe Ratio = (R_p - R_f) / sigma_p", '
                 '"bullet_id": ""}]}')


async def test_every_update_or_remove_of_the_real_model_names_an_id_of_the_playbook() -> None:
    curate = curator.curator_messages(PLAYBOOK, "", [REFLECTION])
    told = (*curate[:-1], Message(role="user", content=f"{curate[-1].content}\n\n{EMPTY_ID_EDIT}"))
    async with LocalServer(LocalConfig(threads=THREADS)) as server:
        async with EndpointClient(EndpointConfig(name="local", base_url=server.url, model=server.alias)) as client:
            results = [await client.chat(ChatRequest(role="curator", messages=messages, max_tokens=500,
                                                     json_schema=ops_schema(curator.CURATOR_SCHEMA, PLAYBOOK),
                                                     schema_name="operations"))
                       for messages in (curate, told)]
    edits = []
    for result in results:
        assert result.error is None, result.error
        ops = parse_curator(result.data, result.text)
        assert isinstance(ops, tuple), ops
        edits += [op for op in ops if op.kind is not OpKind.ADD]
    assert edits, [r.text for r in results]  # the reflection names a wrong bullet; the second asks for an edit
    assert {op.bullet_id for op in edits} <= set(ids_in(PLAYBOOK)), [r.text for r in results]


RECORDED = Path(__file__).parent.parent / "data" / "real-replies" / "qwen2.5-coder-0.5b-llamacpp.jsonl"


def _first_reductions_proposals() -> list[tuple]:
    """The curator replies the recorded Combee run reduced first (tests/data/real-replies/README.md)."""
    proposals = []
    for line in RECORDED.read_text().splitlines():
        reply = json.loads(line)
        if reply["run"] == "formula-combee-bench":
            if reply["role"] == "reducer":
                return proposals
            proposals.append(parse_curator(None, reply["content"]))
    raise AssertionError("no recorded reduction")


async def test_the_real_model_keeps_a_proposed_lesson_when_reducing_an_empty_playbooks_proposals() -> None:
    proposals = _first_reductions_proposals()
    async with LocalServer(LocalConfig(threads=THREADS)) as server:
        async with EndpointClient(EndpointConfig(name="local", base_url=server.url, model=server.alias)) as client:
            result = await client.chat(ChatRequest(
                role="reducer", messages=reducer.reducer_messages("", proposals), max_tokens=reducer.REDUCER_MAX_TOKENS,
                json_schema=reducer.reducer_schema("", proposals), schema_name="reduction"))
    assert result.error is None, result.error
    kept = json.loads(result.text)["keep"]
    assert kept and set(kept) <= {reducer.op_ref(i, j) for i, ops in enumerate(proposals) for j in range(len(ops))}
    merged = reducer.parse_reduction(result.data, result.text, proposals)
    assert isinstance(merged, tuple) and merged, result.text
