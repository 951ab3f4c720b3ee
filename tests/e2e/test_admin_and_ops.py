"""Admin service, domain sharing, the CLI, health, reflection and the async client over a socket."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from memplane import AdminClient, AsyncMemoryClient, MemoryClient
from memplane.errors import NotFoundError, PermissionDeniedError, UnauthenticatedError


def test_domain_memory_is_shared_with_members_only(server, platform_key, new_tenant):
    domain = f"payments-{uuid.uuid4().hex[:6]}"
    (a, key_a), (b, key_b), (_, key_c) = new_tenant(), new_tenant(), new_tenant()
    with AdminClient(server.target, platform_key) as admin:
        admin.create_domain(domain, description="shared payments knowledge")
        admin.grant_domain(domain, a, "read_write")
        admin.grant_domain(domain, b, "read")
    with MemoryClient(server.target, key_a) as ca, MemoryClient(server.target, key_b) as cb, \
            MemoryClient(server.target, key_c) as cc:
        ca.write([{"content": "Refunds over 1000 EUR need two approvals", "kind": "lesson", "scope": "domain",
                   "domain": domain}])
        [hit] = cb.search("refund approvals", top_k=1).hits
        assert hit.memory.scope.name == "DOMAIN" and hit.memory.domain == domain
        assert cc.search("refund approvals").hits == ()
        with pytest.raises(PermissionDeniedError):
            cb.write([{"content": "B tries", "kind": "lesson", "scope": "domain", "domain": domain}])


def test_reader_key_cannot_write_and_revoked_key_is_refused(server, new_tenant):
    tenant, admin_key = new_tenant()
    with AdminClient(server.target, admin_key) as admin:
        reader = admin.create_api_key(tenant_id=tenant, role="reader", display_name="ro")
        listed = admin.list_api_keys(tenant_id=tenant)
        assert reader.api_key.id in {k.id for k in listed.items}
    with MemoryClient(server.target, reader.secret) as ro:
        ro.search("anything")
        with pytest.raises(PermissionDeniedError) as err:
            ro.write([{"content": "nope", "kind": "fact"}])
        assert err.value.reason == "READ_ONLY_KEY"
    with AdminClient(server.target, admin_key) as admin:
        admin.revoke_api_key(reader.api_key.id)
        events = admin.list_audit_events(tenant_id=tenant)
        assert "RevokeApiKey" in {e.action for e in events.items}
    import time

    time.sleep(2.5)  # the server caches resolved keys for at most 2 seconds
    with MemoryClient(server.target, reader.secret) as ro, pytest.raises(UnauthenticatedError):
        ro.search("anything")


def test_tenant_admin_cannot_see_other_tenants(server, new_tenant):
    (_, key_a), (b, _) = new_tenant(), new_tenant()
    with AdminClient(server.target, key_a) as admin:
        with pytest.raises(PermissionDeniedError):
            admin.get_tenant(b)
        with pytest.raises(PermissionDeniedError):
            admin.create_agent(b, "intruder")
        with pytest.raises(PermissionDeniedError):
            admin.list_tenants()


def test_cli_admin_manages_tenants(server, platform_key):
    tenant = f"cli-{uuid.uuid4().hex[:6]}"
    out = subprocess.run(
        [sys.executable, "-m", "memplane_server.cli", "admin", "create-tenant", "--id", tenant,
         "--target", server.target, "--api-key", platform_key],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["tenant"]["id"] == tenant
    out = subprocess.run(
        [sys.executable, "-m", "memplane_server.cli", "admin", "create-agent", "--tenant", tenant, "--id", "bot",
         "--target", server.target, "--api-key", platform_key],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "memplane_server.cli", "admin", "list-agents", "--tenant", tenant,
         "--target", server.target, "--api-key", platform_key],
        capture_output=True, text=True, timeout=60,
    )
    assert [a["id"] for a in json.loads(listed.stdout)["items"]] == ["bot"]


def test_cli_admin_without_a_key_says_how_to_get_one(server):
    env = {k: v for k, v in os.environ.items() if k != "MEMPLANE_API_KEY"}
    out = subprocess.run(
        [sys.executable, "-m", "memplane_server.cli", "admin", "list-tenants", "--target", server.target],
        capture_output=True, text=True, timeout=60, env=env,
    )
    assert out.returncode == 2 and "MEMPLANE_API_KEY" in out.stderr


def test_health_reports_serving(server):
    with grpc.insecure_channel(server.target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = stub.Check(health_pb2.HealthCheckRequest(service="memplane.v1.MemoryService"))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_lists_the_services(server):
    with grpc.insecure_channel(server.target) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        [reply] = list(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
        names = {s.name for s in reply.list_services_response.service}
        assert {"memplane.v1.MemoryService", "memplane.v1.AdminService", "memplane.v1.OperationsService"} <= names


async def test_async_client_has_the_same_behaviour(server, new_tenant):
    tenant, key = new_tenant()
    async with AsyncMemoryClient(server.target, key) as client:
        written = await client.write([{"content": "Async clients work too", "kind": "fact"}])
        hits = (await client.search("async clients")).hits
        assert hits[0].memory.id == written.memories[0].id
        with pytest.raises(NotFoundError):
            await client.get_memory(str(uuid.uuid4()))


def test_operations_are_per_tenant(server, new_tenant):
    (_, key_a), (_, key_b) = new_tenant(), new_tenant()
    with MemoryClient(server.target, key_a) as a, MemoryClient(server.target, key_b) as b:
        op = a.reflect(task={"task_id": "t", "request": "Do it"}, mode="async").operation
        assert op is not None
        with pytest.raises(NotFoundError):
            b.get_operation(op.id)
        with pytest.raises(NotFoundError):
            b.cancel_operation(op.id)
        assert op.id in {o.id for o in a.list_operations().items}
        assert b.list_operations().items == ()


def test_a_client_without_proto_files_can_write_and_search_through_reflection(server, tenant_key):
    """What grpcurl does: learn the schema from reflection, then call with JSON."""
    from google.protobuf import descriptor_pool, json_format, message_factory
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

    with grpc.insecure_channel(server.target) as channel:
        pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
        service = pool.FindServiceByName("memplane.v1.MemoryService")
        metadata = [("authorization", f"Bearer {tenant_key}")]

        def call(method_name: str, body: str):
            method = service.FindMethodByName(method_name)
            request_cls = message_factory.GetMessageClass(method.input_type)
            response_cls = message_factory.GetMessageClass(method.output_type)
            rpc = channel.unary_unary(f"/{service.full_name}/{method_name}",
                                      request_serializer=request_cls.SerializeToString,
                                      response_deserializer=response_cls.FromString)
            return json_format.MessageToDict(rpc(json_format.Parse(body, request_cls()), metadata=metadata))

        written = call("Write", '{"memories":[{"kind":"KIND_FACT","content":"Reflection clients can write"}]}')
        found = call("Search", '{"query":"reflection clients","topK":1}')
        assert found["hits"][0]["memory"]["id"] == written["memories"][0]["id"]


def test_admin_read_calls_and_grant_revocation(server, platform_key, new_tenant):
    tenant, key = new_tenant()
    domain = f"ops-{uuid.uuid4().hex[:6]}"
    with AdminClient(server.target, platform_key) as admin:
        assert admin.get_tenant(tenant).id == tenant
        assert tenant in {t.id for t in admin.list_tenants(page_size=500).items}
        assert [a.id for a in admin.list_agents(tenant).items] == ["a1", "a2"]
        admin.create_domain(domain)
        admin.grant_domain(domain, tenant, "read_write")
        assert domain in {d.name for d in admin.list_domains(page_size=500).items}
        assert [(g.domain, g.tenant_id) for g in admin.list_domain_grants(tenant_id=tenant)] == [(domain, tenant)]
    with MemoryClient(server.target, key) as client:
        client.write([{"content": "domain note", "kind": "fact", "scope": "domain", "domain": domain}])
    with AdminClient(server.target, platform_key) as admin:
        admin.revoke_domain_grant(domain, tenant)
        assert list(admin.list_domain_grants(tenant_id=tenant)) == []
    import time

    time.sleep(2.5)  # grants are cached for at most 2 seconds
    with MemoryClient(server.target, key) as client:
        assert client.search("domain note").hits == ()
        with pytest.raises(PermissionDeniedError):
            client.write([{"content": "again", "kind": "fact", "scope": "domain", "domain": domain}])


async def test_fifty_concurrent_writes_with_one_request_id_get_one_identical_response(server, new_tenant):
    import asyncio

    tenant, key = new_tenant()
    async with AsyncMemoryClient(server.target, key) as client:
        results = await asyncio.gather(*(
            client.write([{"content": "Release 2.4 shipped on Monday", "kind": "event"}], request_id="same-call")
            for _ in range(50)))
        assert all(r.memories == results[0].memories for r in results)
        assert (await client.get_stats()).total == 1
