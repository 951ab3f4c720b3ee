"""Bad input for every RPC, sent as raw protobuf: the right status and ErrorInfo reason, and the
server keeps serving. (The SDK refuses some of these before sending; the server must too.)"""
from __future__ import annotations

import uuid

import grpc
import pytest
from google.protobuf import field_mask_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from memplane.errors import from_rpc_error
from memplane.v1 import admin_service_pb2 as a
from memplane.v1 import admin_service_pb2_grpc as a_grpc
from memplane.v1 import memory_pb2 as m
from memplane.v1 import memory_service_pb2 as s
from memplane.v1 import memory_service_pb2_grpc as s_grpc
from memplane.v1 import operations_service_pb2 as o
from memplane.v1 import operations_service_pb2_grpc as o_grpc

INVALID, NOT_FOUND, DENIED, EXISTS = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                                      grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.ALREADY_EXISTS)
UNKNOWN_ID = str(uuid.UUID(int=1))

MEMORY_CASES = [
    ("GetMemory", s.GetMemoryRequest(), INVALID, "ID_REQUIRED"),
    ("GetMemory", s.GetMemoryRequest(id=UNKNOWN_ID), NOT_FOUND, "MEMORY_NOT_FOUND"),
    ("GetMemory", s.GetMemoryRequest(id="../../etc/passwd"), NOT_FOUND, "MEMORY_NOT_FOUND"),
    ("ListMemories", s.ListMemoriesRequest(page_token="garbage!"), INVALID, "INVALID_PAGE_TOKEN"),
    ("ListMemories", s.ListMemoriesRequest(page_size=-1), INVALID, "INVALID_PAGE_SIZE"),
    ("ListMemories", s.ListMemoriesRequest(filter=m.MemoryFilter(layers=[9])), INVALID, "UNKNOWN_ENUM_VALUE"),
    ("UpdateMemory", s.UpdateMemoryRequest(memory=m.Memory(id=UNKNOWN_ID)), INVALID, "UPDATE_MASK_REQUIRED"),
    ("UpdateMemory", s.UpdateMemoryRequest(memory=m.Memory(content="x"),
                                           update_mask=field_mask_pb2.FieldMask(paths=["content"])),
     INVALID, "ID_REQUIRED"),
    ("UpdateMemory", s.UpdateMemoryRequest(memory=m.Memory(id=UNKNOWN_ID),
                                           update_mask=field_mask_pb2.FieldMask(paths=["tenant_id"])),
     INVALID, "FIELD_NOT_UPDATABLE"),
    ("UpdateMemory", s.UpdateMemoryRequest(memory=m.Memory(id=UNKNOWN_ID, content="x"),
                                           update_mask=field_mask_pb2.FieldMask(paths=["content"])),
     NOT_FOUND, "MEMORY_NOT_FOUND"),
    ("ListMemoryHistory", s.ListMemoryHistoryRequest(), INVALID, "SUBJECT_REQUIRED"),
    ("ListMemoryHistory", s.ListMemoryHistoryRequest(memory_id=UNKNOWN_ID), NOT_FOUND, "MEMORY_NOT_FOUND"),
    ("ListMemoryHistory", s.ListMemoryHistoryRequest(entity=s.EntityRef(entity="user"), page_token="%%"),
     INVALID, "INVALID_PAGE_TOKEN"),
    ("SubmitFeedback", s.SubmitFeedbackRequest(), INVALID, "IDS_REQUIRED"),
    ("SubmitFeedback", s.SubmitFeedbackRequest(memory_ids=[UNKNOWN_ID]), NOT_FOUND, "MEMORY_NOT_FOUND"),
    ("SubmitFeedback", s.SubmitFeedbackRequest(memory_ids=[UNKNOWN_ID] * 1000), INVALID, "BATCH_TOO_LARGE"),
    ("GetWorkingMemory", s.GetWorkingMemoryRequest(), INVALID, "SESSION_REQUIRED"),
    ("GetWorkingMemory", s.GetWorkingMemoryRequest(session_id="s" * 1000), INVALID, "INVALID_SESSION_ID"),
    ("GetWorkingMemory", s.GetWorkingMemoryRequest(session_id="a\x00b"), INVALID, "INVALID_SESSION_ID"),
    ("GetStats", s.GetStatsRequest(filter=m.MemoryFilter(kinds=[123])), INVALID, "UNKNOWN_ENUM_VALUE"),
    ("GetStats", s.GetStatsRequest(filter=m.MemoryFilter(min_confidence=float("nan"))), INVALID, "INVALID_CONFIDENCE"),
    ("GetStats", s.GetStatsRequest(filter=m.MemoryFilter(statuses=[0])), INVALID, "UNKNOWN_ENUM_VALUE"),
    ("Search", s.SearchRequest(query="x", top_k=-3), INVALID, "INVALID_LIMIT"),
    ("Search", s.SearchRequest(query="x", time_zone="Mars/Olympus"), INVALID, "INVALID_TIME_ZONE"),
    ("Write", s.WriteRequest(memories=[s.MemoryInput(kind=m.KIND_FACT, content="x")], time_zone="Nowhere/Land"),
     INVALID, "INVALID_TIME_ZONE"),
    ("Write", s.WriteRequest(), INVALID, "MEMORIES_REQUIRED"),
    ("Write", s.WriteRequest(memories=[s.MemoryInput(kind=m.KIND_FACT, content="x", confidence=float("nan"))]),
     INVALID, "INVALID_CONFIDENCE"),
]

OPERATION_CASES = [
    ("GetOperation", o.GetOperationRequest(id=UNKNOWN_ID), NOT_FOUND, "OPERATION_NOT_FOUND"),
    ("GetOperation", o.GetOperationRequest(id="nope"), NOT_FOUND, "OPERATION_NOT_FOUND"),
    ("ListOperations", o.ListOperationsRequest(state=42), INVALID, "UNKNOWN_ENUM_VALUE"),
    ("ListOperations", o.ListOperationsRequest(page_token="@@"), INVALID, "INVALID_PAGE_TOKEN"),
    ("CancelOperation", o.CancelOperationRequest(id=UNKNOWN_ID), NOT_FOUND, "OPERATION_NOT_FOUND"),
    ("CancelOperation", o.CancelOperationRequest(), NOT_FOUND, "OPERATION_NOT_FOUND"),
]

ADMIN_CASES = [
    ("CreateTenant", a.CreateTenantRequest(tenant=a.Tenant(id="Bad Id!")), INVALID, "INVALID_TENANT_ID"),
    ("CreateTenant", a.CreateTenantRequest(tenant=a.Tenant(id="acme")), EXISTS, "TENANT_EXISTS"),
    ("CreateTenant", a.CreateTenantRequest(tenant=a.Tenant(id="neg", max_memories=-1)), INVALID,
     "INVALID_MAX_MEMORIES"),
    ("GetTenant", a.GetTenantRequest(id="no-such-tenant"), NOT_FOUND, "TENANT_NOT_FOUND"),
    ("CreateAgent", a.CreateAgentRequest(agent=a.Agent(tenant_id="no-such-tenant", id="x")), NOT_FOUND,
     "TENANT_NOT_FOUND"),
    ("CreateAgent", a.CreateAgentRequest(agent=a.Agent(tenant_id="acme", id="")), INVALID, "INVALID_AGENT_ID"),
    ("ListAgents", a.ListAgentsRequest(tenant_id="acme", page_size=-5), INVALID, "INVALID_PAGE_SIZE"),
    ("CreateApiKey", a.CreateApiKeyRequest(tenant_id="acme"), INVALID, "ROLE_REQUIRED"),
    ("CreateApiKey", a.CreateApiKeyRequest(tenant_id="acme", role=a.ROLE_AGENT), INVALID, "AGENT_ROLE_MISMATCH"),
    ("CreateApiKey", a.CreateApiKeyRequest(tenant_id="acme", role=77), INVALID, "UNKNOWN_ENUM_VALUE"),
    ("ListApiKeys", a.ListApiKeysRequest(tenant_id="acme", page_token="~~"), INVALID, "INVALID_PAGE_TOKEN"),
    ("RevokeApiKey", a.RevokeApiKeyRequest(id="nope"), NOT_FOUND, "API_KEY_NOT_FOUND"),
    ("CreateDomain", a.CreateDomainRequest(domain=a.Domain(name="")), INVALID, "INVALID_DOMAIN_ID"),
    ("GrantDomain", a.GrantDomainRequest(grant=a.DomainGrant(domain="ghost", tenant_id="acme",
                                                             access=a.DOMAIN_ACCESS_READ)), NOT_FOUND,
     "DOMAIN_OR_TENANT_NOT_FOUND"),
    ("GrantDomain", a.GrantDomainRequest(grant=a.DomainGrant(domain="ghost", tenant_id="acme")), INVALID,
     "ACCESS_REQUIRED"),
    ("RevokeDomainGrant", a.RevokeDomainGrantRequest(domain="ghost", tenant_id="acme"), NOT_FOUND,
     "GRANT_NOT_FOUND"),
    ("ListDomains", a.ListDomainsRequest(page_size=-1), INVALID, "INVALID_PAGE_SIZE"),
    ("ListAuditEvents", a.ListAuditEventsRequest(page_token="!!"), INVALID, "INVALID_PAGE_TOKEN"),
]


def _call(stub, method, request, key):
    with pytest.raises(grpc.RpcError) as err:
        getattr(stub, method)(request, metadata=[("authorization", f"Bearer {key}")])
    return err.value.code(), from_rpc_error(err.value).reason


@pytest.fixture(scope="module")
def channel(server):
    with grpc.insecure_channel(server.target) as ch:
        yield ch


def _still_serving(channel) -> bool:
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    return reply.status == health_pb2.HealthCheckResponse.SERVING


@pytest.mark.parametrize("method, request_, code, reason", MEMORY_CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_memory_service_bad_input(channel, tenant_key, method, request_, code, reason):
    assert _call(s_grpc.MemoryServiceStub(channel), method, request_, tenant_key) == (code, reason)
    assert _still_serving(channel)


@pytest.mark.parametrize("method, request_, code, reason", OPERATION_CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_operations_service_bad_input(channel, tenant_key, method, request_, code, reason):
    assert _call(o_grpc.OperationsServiceStub(channel), method, request_, tenant_key) == (code, reason)


@pytest.mark.parametrize("method, request_, code, reason", ADMIN_CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_admin_service_bad_input(channel, platform_key, method, request_, code, reason):
    assert _call(a_grpc.AdminServiceStub(channel), method, request_, platform_key) == (code, reason)


def test_admin_calls_need_an_admin_key(channel, tenant_key):
    stub = a_grpc.AdminServiceStub(channel)
    assert _call(stub, "CreateDomain", a.CreateDomainRequest(domain=a.Domain(name="x")), tenant_key) == (
        DENIED, "PLATFORM_ADMIN_REQUIRED")
    assert _call(stub, "ListTenants", a.ListTenantsRequest(), tenant_key) == (DENIED, "PLATFORM_ADMIN_REQUIRED")


def _length_delimited(field: int, payload: bytes) -> bytes:
    return bytes([field << 3 | 2, len(payload)]) + payload


@pytest.mark.parametrize("raw", [
    # WriteRequest.memories[0].content = b"\xff\xfe" (not UTF-8)
    _length_delimited(1, _length_delimited(5, b"\xff\xfe") + bytes([4 << 3, 3])),
    # WriteRequest.memories[0].metadata = {"k": "\xc3"} (a Struct string value cut mid-character)
    _length_delimited(1, bytes([4 << 3, 3]) + _length_delimited(5, b"x") + _length_delimited(
        11, _length_delimited(1, _length_delimited(1, b"k") + _length_delimited(2, _length_delimited(3, b"\xc3"))))),
])
def test_invalid_utf8_is_invalid_argument(channel, tenant_key, raw):
    write = channel.unary_unary("/memplane.v1.MemoryService/Write", request_serializer=lambda b: b,
                                response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as err:
        write(raw, metadata=[("authorization", f"Bearer {tenant_key}")])
    assert err.value.code() is INVALID and from_rpc_error(err.value).reason == "MALFORMED_REQUEST"
    assert _still_serving(channel)
