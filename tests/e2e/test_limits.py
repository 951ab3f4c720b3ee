"""Quotas over the wire: per-key rates with RetryInfo that the SDK honours, calls without a valid
key limited per client address, and tenant memory caps."""
from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from memplane import AdminClient, MemoryClient, RetryPolicy
from memplane.errors import ResourceExhaustedError, from_rpc_error
from memplane.v1 import memory_service_pb2, memory_service_pb2_grpc
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, fresh_database


@pytest.fixture(scope="module")
def limited_server(services_urls):
    database_url, redis_url = services_urls
    url = asyncio.run(fresh_database(database_url, "memplane_limits"))
    proc = ServerProcess({
        "MEMPLANE_DATABASE_URL": url,
        "MEMPLANE_REDIS_URL": redis_url.rsplit("/", 1)[0] + "/2",
        "MEMPLANE_DATA_DIR": str(make_shared_tmpdir("memplane-limits-")),
        "MEMPLANE_BOOTSTRAP_TENANT": "limits",
        "MEMPLANE_RATE_LIMIT_PER_SECOND": "2",
        "MEMPLANE_RATE_LIMIT_BURST": "3",
        "MEMPLANE_MAX_MEMORIES_PER_TENANT": "4",
        "MEMPLANE_AUTH_FAILURES_PER_SECOND": "1",
        "MEMPLANE_AUTH_FAILURES_BURST": "3",
    }).start()
    yield proc
    proc.stop()


def five_calls_from_a_full_bucket(server, call) -> list:
    """The status of five calls in a row (a burst of 3 at 2/s), and the errors of those refused."""
    key = server.key("tenant admin")
    with grpc.insecure_channel(server.target) as channel:
        stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
        time.sleep(2)  # a full bucket
        codes, errors = [], []
        for _ in range(5):
            try:
                call(stub, [("authorization", f"Bearer {key}")])
                codes.append("OK")
            except grpc.RpcError as err:
                codes.append(err.code().name)
                errors.append(from_rpc_error(err))
    return codes, errors


def test_over_the_rate_the_server_says_when_to_retry(limited_server):
    codes, errors = five_calls_from_a_full_bucket(
        limited_server, lambda stub, md: stub.GetStats(memory_service_pb2.GetStatsRequest(), metadata=md))
    assert codes[:3] == ["OK", "OK", "OK"] and "RESOURCE_EXHAUSTED" in codes[3:]
    assert all(e.reason == "RATE_LIMITED" and 0 < e.retry_after <= 0.5 for e in errors)


def test_a_search_over_the_rate_is_refused_although_its_check_runs_beside_it(limited_server):
    codes, errors = five_calls_from_a_full_bucket(limited_server, lambda stub, md: stub.Search(
        memory_service_pb2.SearchRequest(query="anything at all"), metadata=md))
    assert codes[:3] == ["OK", "OK", "OK"] and "RESOURCE_EXHAUSTED" in codes[3:]
    assert all(e.reason == "RATE_LIMITED" for e in errors)


def test_the_sdk_waits_as_told_and_succeeds(limited_server):
    key = limited_server.key("tenant admin")
    with MemoryClient(limited_server.target, key) as client:
        time.sleep(2)
        for _ in range(8):  # well over the burst: later calls wait for their RetryInfo delay
            client.get_stats()
    with MemoryClient(limited_server.target, key, retry=RetryPolicy(max_attempts=1)) as client:
        with pytest.raises(ResourceExhaustedError):
            for _ in range(10):
                client.get_stats()


def test_tenant_memory_cap_is_enforced_over_the_wire(limited_server):
    platform = limited_server.key("platform admin")
    time.sleep(2)
    with AdminClient(limited_server.target, platform) as admin:
        created = admin.create_tenant("capped", max_memories=2, create_admin_key=True)
    time.sleep(2)
    with MemoryClient(limited_server.target, created.admin_key.secret, retry=RetryPolicy(max_attempts=1)) as client:
        client.write([{"content": "a", "kind": "fact"}, {"content": "b", "kind": "fact"}])
        with pytest.raises(ResourceExhaustedError) as err:
            client.write([{"content": "c", "kind": "fact"}])
        assert err.value.reason == "MEMORY_QUOTA_EXCEEDED"


def test_calls_without_a_valid_key_are_limited_per_address_and_valid_keys_are_not(limited_server):
    with grpc.insecure_channel(limited_server.target) as channel:
        stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
        valid = [("authorization", f"Bearer {limited_server.key('tenant admin')}")]
        time.sleep(3)  # full buckets
        stub.GetStats(memory_service_pb2.GetStatsRequest(), metadata=valid)
        reasons = []
        for n in range(6):
            metadata = [("authorization", f"Bearer mpk_nope{n}_wrong")] if n % 2 else []
            try:
                stub.GetStats(memory_service_pb2.GetStatsRequest(), metadata=metadata)
                reasons.append("OK")
            except grpc.RpcError as err:
                reasons.append(f"{err.code().name} {from_rpc_error(err).reason}")
        assert reasons[:3] == ["UNAUTHENTICATED API_KEY_REQUIRED", "UNAUTHENTICATED INVALID_API_KEY",
                               "UNAUTHENTICATED API_KEY_REQUIRED"], reasons
        assert set(reasons[3:]) == {"RESOURCE_EXHAUSTED TOO_MANY_FAILED_AUTHENTICATIONS"}, reasons
        # A caller whose key just proved valid, from the same address, is not held back.
        stub.GetStats(memory_service_pb2.GetStatsRequest(), metadata=valid)
