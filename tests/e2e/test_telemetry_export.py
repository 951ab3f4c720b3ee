"""A server sends its spans over OTLP to a collector and serves its metrics to Prometheus."""
from __future__ import annotations

import asyncio
import shutil
import time
import urllib.request
from concurrent import futures

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from memplane import MemoryClient, UnauthenticatedError
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, free_port, fresh_database

pytestmark = pytest.mark.slow


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """The trace half of an OpenTelemetry collector's OTLP/gRPC receiver: keeps span names."""

    def __init__(self) -> None:
        self.span_names: list[str] = []

    def Export(self, request, context):
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                self.span_names.extend(span.name for span in scope.spans)
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.fixture(scope="module")
def collector():
    receiver = Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield receiver, f"127.0.0.1:{port}"
    server.stop(0)


@pytest.fixture(scope="module")
def observed_server(services_urls, collector):
    data = make_shared_tmpdir("memplane-telemetry-")
    metrics = f"127.0.0.1:{free_port()}"
    proc = ServerProcess({
        "MEMPLANE_DATABASE_URL": asyncio.run(fresh_database(services_urls[0], "memplane_telemetry")), "MEMPLANE_REDIS_URL": services_urls[1].rsplit("/", 1)[0] + "/5",
        "MEMPLANE_DATA_DIR": str(data), "MEMPLANE_BOOTSTRAP_TENANT": "acme", "MEMPLANE_CONTEXT_WINDOW": "0",
        "MEMPLANE_TELEMETRY_EXPORTER": "otlp", "MEMPLANE_OTLP_ENDPOINT": collector[1],
        "MEMPLANE_METRICS_LISTEN": metrics,
    }).start()
    # One RPC refused for want of a key (traced and timed all the same), then a tenant's traffic.
    with MemoryClient(proc.target, "mpk_x_y") as client, pytest.raises(UnauthenticatedError):
        client.search("anything")
    with MemoryClient(proc.target, proc.key("tenant admin")) as client:
        client.write([{"content": "The user lives in Shanghai", "kind": "fact"}])
        client.search("where does the user live")
    yield proc, metrics
    proc.stop()
    shutil.rmtree(data, ignore_errors=True)


def test_spans_reach_the_otlp_collector(observed_server, collector):
    receiver, _ = collector
    deadline = time.monotonic() + 20  # the batch processor sends every 5 s
    while "/memplane.v1.MemoryService/Search" not in receiver.span_names:
        assert time.monotonic() < deadline, receiver.span_names
        time.sleep(0.2)


def test_prometheus_scrapes_rpc_durations(observed_server):
    _, metrics = observed_server
    body = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10).read().decode()
    assert "rpc_server_duration" in body, body[:2000]


def series_missing(body: str, expected: list[tuple[str, dict[str, str]]]) -> list:
    """The (name, labels) of which no sample line of the scrape has that name and those labels."""
    lines = body.splitlines()
    return [
        (name, labels) for name, labels in expected
        if not any(line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items())
                   for line in lines)
    ]


def test_prometheus_serves_rpc_storage_queue_and_embedding_series(observed_server):
    _, metrics = observed_server
    expected = [
        ("rpc_server_duration_milliseconds_bucket",
         {"rpc_method": "/memplane.v1.MemoryService/Write", "rpc_grpc_status_code": "OK"}),
        ("rpc_server_duration_milliseconds_count", {"rpc_grpc_status_code": "UNAUTHENTICATED"}),
        ("memplane_memories_stored", {"memplane_tenant": "acme"}),
        ("memplane_jobs_pending", {}), ("memplane_jobs_oldest_pending_age_seconds", {}),
        ("memplane_turn_windows_backlog", {}),
        ("memplane_embedding_duration_milliseconds_count", {"memplane_embedding_purpose": "query"}),
        ("memplane_embedding_duration_milliseconds_count", {"memplane_embedding_purpose": "passages"}),
    ]
    deadline = time.monotonic() + 20  # the gauges are read every 10 s
    while missing := series_missing(
            urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10).read().decode(), expected):
        assert time.monotonic() < deadline, missing
        time.sleep(1)
