"""Every RPC leaves an OpenTelemetry span and a duration measurement; its PostgreSQL statements,
Redis commands, embeddings and LLM calls are child spans; none carries a key or memory text."""
from __future__ import annotations

import asyncio
import json
import uuid

import grpc
import pytest
import pytest_asyncio
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memplane import AsyncMemoryClient
from memplane.v1 import memory_service_pb2, memory_service_pb2_grpc
from memplane_server.api.drain import Drain
from memplane_server.api.server import build_server
from memplane_server.core.access.attribution import reset_work_tenant, set_work_tenant
from memplane_server.core.access.caller import Role
from memplane_server.llm.chat import ChatModel, json_answer
from memplane_server.llm.structured import Expected
from memplane_server.runtime import build_services
from memplane_server.services.admin import AdminService
from tests.integration.conftest import PLATFORM
from tests.support.fake_llm import Reply

pytestmark = pytest.mark.asyncio(loop_scope="session")
SECRET_TEXT = "the vault combination is 7-31-4"


@pytest.fixture(scope="module")
def telemetry():
    """In-memory exporters, installed once: OpenTelemetry lets a process set its providers once."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return spans, reader


def points(reader: InMemoryMetricReader, name: str) -> list[tuple[dict, object]]:
    return [
        (dict(p.attributes), p)
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics if metric.name == name
        for p in metric.data.data_points
    ]


@pytest_asyncio.fixture(loop_scope="session")
async def served(runtime, deps, telemetry):
    """A server on a port (the composition root's services) and a fresh tenant's writer key."""
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    admin = AdminService(deps.tenancy)
    await admin.create_tenant(PLATFORM, tenant, tenant, 0, False)
    _, secret = await admin.create_api_key(PLATFORM, tenant, None, Role.WRITER, "telemetry")
    server, _ = build_server(build_services(deps, runtime.pool, runtime.redis_client), Drain())
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    telemetry[0].clear()
    yield f"127.0.0.1:{port}", secret
    await server.stop(0)


def tree(spans: list[ReadableSpan], rpc: str) -> list[str]:
    """Names of the spans under the (one) span of the RPC."""
    [root] = [s for s in spans if s.name == f"/memplane.v1.MemoryService/{rpc}"]
    children: dict[int, list[ReadableSpan]] = {}
    for s in spans:
        if s.parent is not None:
            children.setdefault(s.parent.span_id, []).append(s)
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop().context.span_id, []):
            found.append(child.name)
            stack.append(child)
    return found


async def test_rpcs_are_traced_and_timed(served, telemetry):
    spans, reader = telemetry
    async with grpc.aio.insecure_channel(served[0]) as channel:
        stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Search(memory_service_pb2.SearchRequest(query="x"))
        assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
    # The server ends the RPC's span after it has sent the answer, which the client may read first.
    for _ in range(200):
        if "/memplane.v1.MemoryService/Search" in {s.name for s in spans.get_finished_spans()}:
            break
        await asyncio.sleep(0.01)
    assert "/memplane.v1.MemoryService/Search" in {s.name for s in spans.get_finished_spans()}
    assert {"rpc.method": "/memplane.v1.MemoryService/Search", "rpc.grpc.status_code": "UNAUTHENTICATED"} in [
        a for a, _ in points(reader, "rpc.server.duration")]


async def test_a_server_built_untraced_makes_no_rpc_span_but_still_times_calls(runtime, deps, telemetry):
    """With no exporter (MEMPLANE_TELEMETRY_EXPORTER=none) the server is built untraced: its calls
    are timed, and nobody pays for a span nothing would send."""
    spans, reader = telemetry
    server, _ = build_server(build_services(deps, runtime.pool, runtime.redis_client), Drain(), traced=False)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    spans.clear()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError):
                await memory_service_pb2_grpc.MemoryServiceStub(channel).GetStats(memory_service_pb2.GetStatsRequest())
    finally:
        await server.stop(0)
    assert not [s for s in spans.get_finished_spans() if s.name.startswith("/memplane.")]
    assert {"rpc.method": "/memplane.v1.MemoryService/GetStats", "rpc.grpc.status_code": "UNAUTHENTICATED"} in [
        a for a, _ in points(reader, "rpc.server.duration")]


async def test_a_write_has_embedding_postgresql_and_redis_spans_under_its_rpc(served, telemetry):
    async with AsyncMemoryClient(*served) as client:
        await client.write([{"content": SECRET_TEXT, "kind": "fact"}])
    under = tree(telemetry[0].get_finished_spans(), "Write")
    assert "embedding" in under
    assert "postgresql INSERT" in under or "postgresql WITH" in under, under
    assert any(name.startswith("redis ") for name in under), under


async def test_a_search_has_embedding_and_postgresql_spans_under_its_rpc(served, telemetry):
    async with AsyncMemoryClient(*served) as client:
        await client.search(SECRET_TEXT)
    under = tree(telemetry[0].get_finished_spans(), "Search")
    assert "embedding" in under
    assert any(name.startswith("postgresql ") for name in under), under


async def test_an_llm_call_is_a_span_and_counts_its_tokens_for_the_tenant(fake_llm, telemetry):
    spans, reader = telemetry
    fake_llm.script(Reply(json.dumps({"items": []})))
    chat = ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="k", timeout=5)
    token = set_work_tenant("t-llm")
    try:
        await chat.ask_json("system", SECRET_TEXT, lambda text: json_answer(text, "items"),
                            Expected("items", {"type": "object"}, max_tokens=64))
    finally:
        reset_work_tenant(token)
    assert "llm chat" in {s.name for s in spans.get_finished_spans()}
    tokens = {(a["gen_ai.token.type"], a["memplane.llm.stage"]): p.value for a, p in points(reader, "memplane.llm.tokens")
              if a["memplane.tenant"] == "t-llm"}
    assert tokens == {("input", "items"): 1, ("output", "items"): 1}
    assert points(reader, "memplane.llm.duration")


async def test_no_span_attribute_or_metric_label_holds_a_key_or_memory_text(served, telemetry, fake_llm):
    spans, reader = telemetry
    async with AsyncMemoryClient(*served) as client:
        await client.write([{"content": SECRET_TEXT, "kind": "fact", "session_id": "s-telemetry"}])
        await client.search(SECRET_TEXT)
    exported = [str(dict(s.attributes or {})) + s.name for s in spans.get_finished_spans()]
    exported += [str(a) for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
                 for m in sm.metrics for a in (dict(p.attributes) for p in m.data.data_points)]
    secret = served[1]
    # mpk_<id>_<secret>: the secret is everything after the second "_" (it may hold "_" itself,
    # and a short piece after the last one would be found in any word).
    leaks = [e for e in exported if secret in e or secret.split("_", 2)[2] in e or "vault combination" in e]
    assert exported and leaks == []
