"""OpenTelemetry GenAI spans (combee_fast.tracing), read from an in-memory exporter.

Each traced scenario runs in a child interpreter of its own: a process sets its global tracer
provider once, and the rest of the suite must run untraced. The child prints the spans it
exported as JSON; the test checks them against the run's own files.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("opentelemetry.sdk") is None,
                                reason="opentelemetry-sdk is not installed (the otel extra)")

ROOT = Path(__file__).resolve().parents[1]

PROVIDER = """
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)


def dump():
    spans = [{"name": s.name, "id": s.context.span_id, "trace": s.context.trace_id,
              "parent": s.parent.span_id if s.parent else None, "kind": s.kind.name,
              "links": [link.context.span_id for link in s.links], "attributes": dict(s.attributes)}
             for s in exporter.get_finished_spans()]
    print(json.dumps(spans))
"""


def _spans(script: str, cwd: Path) -> list[dict[str, Any]]:
    done = subprocess.run([sys.executable, "-c", PROVIDER + textwrap.dedent(script) + "\ndump()\n"], cwd=cwd,
                          capture_output=True, text=True, timeout=240, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.returncode == 0, done.stderr[-3000:]
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_a_learn_run_is_one_run_span_a_span_per_step_and_one_per_model_call(tmp_path: Path) -> None:
    spans = _spans("""
        import asyncio
        from combee_fast.config import SessionConfig, SimConfig, TaskConfig, TrainConfig
        from combee_fast.session import open_session

        async def main():
            config = SessionConfig(method="combee", task=TaskConfig(train_split="train[0:30]",
                                   val_split="selection[0:10]"), train=TrainConfig(batch_size=10),
                                   sim=SimConfig("flat", 1e-4))
            async with open_session(config) as session:
                await session.train(out="run")

        asyncio.run(main())
    """, tmp_path)
    run = tmp_path / "run"
    ledger = [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]
    calls = json.loads((run / "calls.json").read_text())
    accounting = json.loads((run / "summary.json").read_text())["accounting"]

    runs = [s for s in spans if s["name"].startswith("combee learn ")]
    assert len(runs) == 1 and runs[0]["name"] == "combee learn ace combee" and runs[0]["parent"] is None
    steps = {s["id"]: s for s in spans if s["name"].startswith("combee step ") or s["name"] == "combee start"}
    assert sorted(s["attributes"]["combee.step"] for s in steps.values() if s["name"] != "combee start") == \
        [row["step"] for row in ledger if row["batch_reason"] != "start"]
    assert all(s["parent"] == runs[0]["id"] for s in steps.values())

    chats = [s for s in spans if s["kind"] == "CLIENT"]
    assert chats and all(s["name"] == "chat sim" and s["parent"] in steps for s in chats)
    assert len({s["trace"] for s in spans}) == 1
    by_role = Counter(s["attributes"]["combee.role"] for s in chats)
    assert by_role == {role: n for role, n in calls.items() if isinstance(n, int) and role != "failed" and n}
    for role in by_role:
        for ours, theirs in (("gen_ai.usage.input_tokens", "prompt_tokens"),
                             ("gen_ai.usage.output_tokens", "completion_tokens")):
            spent = sum(accounting[part][theirs].get(role, 0) for part in ("train", "validation"))
            assert sum(s["attributes"][ours] for s in chats if s["attributes"]["combee.role"] == role) == spent > 0
    first = chats[0]["attributes"]
    assert {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "sim",
            "gen_ai.response.model": "sim", "server.address": "127.0.0.1", "combee.learner": "ace",
            "combee.method": "combee"}.items() <= first.items()
    assert first["gen_ai.response.finish_reasons"] == ["stop"] and first["server.port"] > 0
    assert first["combee.pool"] in ("serve", "evaluate", "propose") and "combee.step" in first


@pytest.mark.slow
def test_an_embedded_learners_steps_join_the_hosts_trace_across_its_thread(tmp_path: Path) -> None:
    spans = _spans("""
        import asyncio
        import msgspec
        from opentelemetry import trace
        from combee_fast.ace.calls import AceCalls
        from combee_fast.config import OnlineConfig, SessionConfig, SimConfig, TaskConfig
        from combee_fast.embedded.threaded import ThreadedLearner
        from combee_fast.playbook import Playbook
        from combee_fast.session import open_session

        async def main():
            config = SessionConfig(task=TaskConfig(train_split="train", val_split="val[0:30]"),
                                   sim=SimConfig("flat", 1e-4))
            async with open_session(config) as session:
                rollouts = [await AceCalls(session.calls).generate(e, "", epoch=0)
                            for e in session.train_split.examples[:8]]
                learner = ThreadedLearner(session.calls, Playbook.empty(), OnlineConfig(batch_size=4, max_wait_s=30.0))
                async with learner:
                    host = trace.get_tracer("host")
                    tickets = []
                    for n, rollout in enumerate(rollouts):
                        with host.start_as_current_span(f"host request {n}"):
                            tickets.append(await learner.submit(rollout))
                    await asyncio.gather(*tickets)

        asyncio.run(main())
    """, tmp_path)
    hosts = {s["name"]: s for s in spans if s["name"].startswith("host request ")}
    steps = [s for s in spans if s["name"].startswith("combee online step ")]
    assert len(hosts) == 8 and len(steps) == 2
    for step, first in zip(steps, ("host request 0", "host request 4")):
        assert step["parent"] == hosts[first]["id"] and step["trace"] == hosts[first]["trace"]
        assert len(step["links"]) == 3 and step["attributes"]["combee.rollouts"] == 4
    under = [s for s in spans if s["kind"] == "CLIENT" and s["parent"] in {step["id"] for step in steps}]
    assert under and all(s["attributes"]["combee.step"] in (0, 1) for s in under)


def test_without_a_provider_nothing_is_traced() -> None:
    done = subprocess.run([sys.executable, "-c", "from combee_fast import tracing; print(tracing.tracer())"],
                          capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.stdout.strip() == "None", done.stderr


LEARN = """
import asyncio
from combee_fast.config import SessionConfig, SimConfig, TaskConfig, TrainConfig
from combee_fast.session import open_session

async def main():
    config = SessionConfig(method="combee", task=TaskConfig(train_split="train[0:10]", val_split="selection[0:5]"),
                           train=TrainConfig(batch_size=10), sim=SimConfig("flat", 1e-4))
    async with open_session(config) as session:
        await session.train()

asyncio.run(main())
"""


@pytest.fixture
def collector() -> Iterator[tuple[str, list[bytes]]]:
    """An OTLP/HTTP trace receiver on loopback: its address and the bodies POSTed to ``/v1/traces``."""
    bodies: list[bytes] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the handler's name is http.server's)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path == "/v1/traces":
                bodies.append(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        thread.join(timeout=10)


@pytest.mark.skipif(importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None,
                    reason="the OTLP exporter is not installed (the otel extra)")
@pytest.mark.slow
def test_the_otlp_endpoint_variable_alone_sends_the_spans_over_otlp(collector: tuple[str, list[bytes]],
                                                                      tmp_path: Path) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    url, bodies = collector
    done = subprocess.run([sys.executable, "-c", LEARN], cwd=tmp_path, capture_output=True, text=True, timeout=240,
                          env={"PYTHONPATH": str(ROOT), "PATH": "", "OTEL_EXPORTER_OTLP_ENDPOINT": url})
    assert done.returncode == 0, done.stderr[-3000:]
    names = []
    for body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        names += [span.name for spans in request.resource_spans for scope in spans.scope_spans for span in scope.spans]
    assert names.count("combee learn ace combee") == 1 and any(name.startswith("combee step ") for name in names)
    assert sum(name == "chat sim" for name in names) > 10


@pytest.mark.skipif(importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None,
                    reason="the OTLP exporter is not installed (the otel extra)")
@pytest.mark.slow
def test_a_process_learners_steps_join_the_hosts_trace_from_its_child(collector: tuple[str, list[bytes]],
                                                                       tmp_path: Path) -> None:
    """The host traces in code (its in-memory exporter); the child process, with the OTLP variable
    it inherits, exports its steps to the collector, each under the host span of its first rollout."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    url, bodies = collector
    script = PROVIDER + textwrap.dedent("""
        import asyncio
        from opentelemetry import trace
        from combee_fast.ace.calls import AceCalls
        from combee_fast.config import EmbedConfig, OnlineConfig, SessionConfig, SimConfig, TaskConfig
        from combee_fast.embedded.process import ProcessLearner
        from combee_fast.playbook import Playbook
        from combee_fast.session import open_session

        async def main():
            config = SessionConfig(task=TaskConfig(train_split="train", val_split="val[0:30]"),
                                   sim=SimConfig("flat", 1e-4))
            async with open_session(config) as session:
                rollouts = [await AceCalls(session.calls).generate(e, "", epoch=0)
                            for e in session.train_split.examples[:4]]
                embed = EmbedConfig(child_sched_idle=False, child_nice=None)
                async with ProcessLearner(session.calls, Playbook.empty(), OnlineConfig(batch_size=4, max_wait_s=30.0),
                                          embed=embed) as learner:
                    host = trace.get_tracer("host")
                    tickets = []
                    for n, rollout in enumerate(rollouts):
                        with host.start_as_current_span(f"host request {n}"):
                            tickets.append(await learner.submit(rollout))
                    await asyncio.gather(*tickets)

        asyncio.run(main())
        dump()
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=240,
                          env={"PYTHONPATH": str(ROOT), "PATH": "", "OTEL_EXPORTER_OTLP_ENDPOINT": url})
    assert done.returncode == 0, done.stderr[-3000:]
    hosts = {s["name"]: s for s in json.loads(done.stdout.strip().splitlines()[-1]) if s["name"].startswith("host ")}
    steps = []
    for body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        steps += [span for spans in request.resource_spans for scope in spans.scope_spans for span in scope.spans
                  if span.name.startswith("combee online step ")]
    assert len(steps) == 1
    first = hosts["host request 0"]
    assert int.from_bytes(steps[0].trace_id, "big") == first["trace"]
    assert int.from_bytes(steps[0].parent_span_id, "big") == first["id"] and len(steps[0].links) == 3
