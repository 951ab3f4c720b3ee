"""Every RPC leaves an OpenTelemetry span and a duration measurement."""
from __future__ import annotations

import grpc
import pytest
from memplane.v1 import memory_service_pb2, memory_service_pb2_grpc
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memplane_server.api.drain import Drain
from memplane_server.api.server import build_server
from memplane_server.runtime import build_services

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_rpcs_are_traced_and_timed(runtime, deps):
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

    server, _ = build_server(build_services(deps, runtime), Drain())
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Search(memory_service_pb2.SearchRequest(query="x"))
            assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
    finally:
        await server.stop(0)
    assert "/memplane.v1.MemoryService/Search" in {s.name for s in spans.get_finished_spans()}
    points = [
        p.attributes
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics if metric.name == "rpc.server.duration"
        for p in metric.data.data_points
    ]
    assert {"rpc.method": "/memplane.v1.MemoryService/Search", "rpc.grpc.status_code": "UNAUTHENTICATED"} in points
