"""Bad input for every RPC, sent as raw protobuf: the right status and ErrorInfo reason, and the
server keeps serving. (The SDK refuses some of these before sending; the server must too.)"""
from __future__ import annotations

import base64
import json
import uuid

import grpc
import pytest
from google.protobuf import duration_pb2, field_mask_pb2, struct_pb2, timestamp_pb2
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
YEAR_1 = timestamp_pb2.Timestamp(seconds=-62135596800)  # 0001-01-01T00:00:00Z: PostgreSQL -infinity via asyncpg
MB = "x" * 1_000_000


def _token(position: list) -> str:
    """A page token of this server's shape holding a position no query can bind."""
    return base64.urlsafe_b64encode(json.dumps(position).encode()).decode().rstrip("=")


def _metadata(value) -> struct_pb2.Struct:
    data = struct_pb2.Struct()
    data.update({"k": value})
    return data


def _fact(**fields) -> s.WriteRequest:
    return s.WriteRequest(memories=[s.MemoryInput(kind=m.KIND_FACT, content="x", **fields)])


def _working(**fields) -> s.WriteRequest:
    return s.WriteRequest(memories=[s.MemoryInput(kind=m.KIND_TURN, layer=m.LAYER_WORKING, session_id="s1",
                                                  content="x", **fields)])


def _update(path: str, **fields) -> s.UpdateMemoryRequest:
    return s.UpdateMemoryRequest(memory=m.Memory(id=UNKNOWN_ID, **fields),
                                 update_mask=field_mask_pb2.FieldMask(paths=[path]))


def _listing(**conditions) -> s.ListMemoriesRequest:
    return s.ListMemoriesRequest(filter=m.MemoryFilter(**conditions))


# Requests that answered INTERNAL (some after storing a row that then broke every read of it),
# or echoed a megabyte back in the error: each is INVALID_ARGUMENT now, with nothing stored.
UNREPRESENTABLE_CASES = [
    ("Write", s.WriteRequest(memories=[s.MemoryInput(kind=m.KIND_EVENT, content="x", occurred_at=YEAR_1)]),
     INVALID, "INVALID_TIMESTAMP"),
    ("Write", _fact(valid_to=timestamp_pb2.Timestamp(seconds=253402300799, nanos=999999999)), INVALID,
     "INVALID_TIMESTAMP"),
    ("UpdateMemory", _update("valid_to", valid_to=YEAR_1), INVALID, "INVALID_TIMESTAMP"),
    ("Search", s.SearchRequest(query="x", as_of_time=YEAR_1), INVALID, "INVALID_TIMESTAMP"),
    ("Write", _fact(entity="user", attribute="city", value="a\x00b"), INVALID, "INVALID_VALUE"),
    ("UpdateMemory", _update("value", value="a\x00b"), INVALID, "INVALID_VALUE"),
    ("Write", _fact(metadata=_metadata(float("nan"))), INVALID, "INVALID_METADATA"),
    ("Write", _fact(metadata=_metadata(float("inf"))), INVALID, "INVALID_METADATA"),
    ("Write", _fact(metadata=_metadata(float("-inf"))), INVALID, "INVALID_METADATA"),
    ("UpdateMemory", _update("metadata", metadata=_metadata(float("nan"))), INVALID, "INVALID_METADATA"),
    ("Write", _fact(metadata=_metadata(MB)), INVALID, "METADATA_TOO_LARGE"),
    ("Write", _working(ttl=duration_pb2.Duration(seconds=10**12)), INVALID, "INVALID_TTL"),
    ("Write", _working(state_key=MB), INVALID, "INVALID_STATE_KEY"),
    ("Write", _fact(tags=["t"] * 10_000), INVALID, "TOO_MANY_TAGS"),
    ("UpdateMemory", _update("tags", tags=["t"] * 10_000), INVALID, "TOO_MANY_TAGS"),
    ("Write", s.WriteRequest(memories=[s.MemoryInput(kind=m.KIND_FACT, content="x")], time_zone="x" * 100_000),
     INVALID, "INVALID_TIME_ZONE"),
    ("Search", s.SearchRequest(query="x", time_zone="\u00e9" * 129), INVALID, "INVALID_TIME_ZONE"),
    ("Write", _fact(scope=m.SCOPE_DOMAIN, domain=MB), INVALID, "INVALID_DOMAIN_ID"),
    ("UpdateMemory", _update(MB), INVALID, "FIELD_NOT_UPDATABLE"),
    ("ListMemories", _listing(agent_id="a\x00b"), INVALID, "INVALID_AGENT_ID"),
    ("ListMemories", _listing(user_id="a\x00b"), INVALID, "INVALID_USER_ID"),
    ("ListMemories", _listing(session_id="a\x00b"), INVALID, "INVALID_SESSION_ID"),
    ("ListMemories", _listing(entity="a\x00b"), INVALID, "INVALID_ENTITY"),
    ("ListMemories", _listing(attribute="a\x00b"), INVALID, "INVALID_ATTRIBUTE"),
    ("ListMemories", _listing(tags=["a\x00b"]), INVALID, "INVALID_TAG"),
    ("ListMemories", _listing(domains=["a\x00b"]), INVALID, "INVALID_DOMAIN_ID"),
    ("ListMemories", s.ListMemoriesRequest(page_token=_token(["2024-01-01", UNKNOWN_ID])), INVALID,
     "INVALID_PAGE_TOKEN"),
    ("GetStats", s.GetStatsRequest(filter=m.MemoryFilter(user_id="a\x00b")), INVALID, "INVALID_USER_ID"),
    ("Search", s.SearchRequest(query="x", filter=m.MemoryFilter(session_id="a\x00b")), INVALID,
     "INVALID_SESSION_ID"),
    ("Search", s.SearchRequest(query="a\x00b"), INVALID, "INVALID_QUERY"),
    ("Search", s.SearchRequest(query="x", scope_weights=[s.ScopeWeight(scope=m.SCOPE_GLOBAL, weight=float("inf"))]),
     INVALID, "INVALID_SCOPE_WEIGHT"),
    ("ListMemoryHistory", s.ListMemoryHistoryRequest(entity=s.EntityRef(entity="a\x00b")), INVALID,
     "INVALID_ENTITY"),
    ("ListMemoryHistory", s.ListMemoryHistoryRequest(entity=s.EntityRef(entity="user"), page_token=_token([10**30])),
     INVALID, "INVALID_PAGE_TOKEN"),
    ("SubmitFeedback", s.SubmitFeedbackRequest(memory_ids=[UNKNOWN_ID], comment="a\x00b"), INVALID,
     "INVALID_COMMENT"),
    ("Forget", s.ForgetRequest(ids=s.MemoryIds(ids=[UNKNOWN_ID]), reason="a\x00b"), INVALID, "INVALID_REASON"),
    ("Forget", s.ForgetRequest(filter=m.MemoryFilter(user_id="a\x00b")), INVALID, "INVALID_USER_ID"),
    ("Reflect", s.ReflectRequest(task=s.TaskTrajectory(task_id="t", request="r", feedback="a\x00b")), INVALID,
     "INVALID_FEEDBACK"),
    ("Reflect", s.ReflectRequest(session=s.SessionSelector(session_id="s1", user_id="a\x00b"),
                                 mode=s.REFLECT_MODE_ASYNC), INVALID, "INVALID_USER_ID"),
]

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
    ("Write", s.WriteRequest(request_id="r" * 129, memories=[s.MemoryInput(kind=m.KIND_FACT, content="x")]),
     INVALID, "REQUEST_ID_TOO_LARGE"),
    ("Write", s.WriteRequest(request_id="é" * 65, memories=[s.MemoryInput(kind=m.KIND_FACT, content="x")]),
     INVALID, "REQUEST_ID_TOO_LARGE"),
    ("Forget", s.ForgetRequest(request_id="a\x00b", ids=s.MemoryIds(ids=[UNKNOWN_ID])), INVALID, "INVALID_REQUEST_ID"),
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
    ("ListOperations", o.ListOperationsRequest(page_token=_token([1, 2])), INVALID, "INVALID_PAGE_TOKEN"),
    ("ListOperations", o.ListOperationsRequest(page_token=_token(["x", "y"])), INVALID, "INVALID_PAGE_TOKEN"),
    ("ListOperations", o.ListOperationsRequest(page_token=_token(["+99999-01-01", "x"])), INVALID,
     "INVALID_PAGE_TOKEN"),
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
    # Values that reached a query as a type or text PostgreSQL refuses: INTERNAL before.
    ("ListAuditEvents", a.ListAuditEventsRequest(page_token=_token(["a"])), INVALID, "INVALID_PAGE_TOKEN"),
    ("ListTenants", a.ListTenantsRequest(page_token=_token([1.5])), INVALID, "INVALID_PAGE_TOKEN"),
    ("ListAgents", a.ListAgentsRequest(tenant_id="acme", page_token=_token([10**30])), INVALID, "INVALID_PAGE_TOKEN"),
    ("ListApiKeys", a.ListApiKeysRequest(tenant_id="acme", page_token=_token([[]])), INVALID, "INVALID_PAGE_TOKEN"),
    ("ListDomains", a.ListDomainsRequest(page_token=_token([{"a": 1}])), INVALID, "INVALID_PAGE_TOKEN"),
    ("GetTenant", a.GetTenantRequest(id="a\x00b"), INVALID, "INVALID_TENANT_ID"),
    ("CreateAgent", a.CreateAgentRequest(agent=a.Agent(tenant_id="a\x00b", id="x")), INVALID, "INVALID_TENANT_ID"),
    ("ListDomainGrants", a.ListDomainGrantsRequest(domain="a\x00b"), INVALID, "INVALID_DOMAIN_ID"),
    ("RevokeDomainGrant", a.RevokeDomainGrantRequest(domain="a\x00b", tenant_id="acme"), INVALID,
     "INVALID_DOMAIN_ID"),
    ("RevokeApiKey", a.RevokeApiKeyRequest(id="a\x00b"), NOT_FOUND, "API_KEY_NOT_FOUND"),
    ("CreateTenant", a.CreateTenantRequest(tenant=a.Tenant(id="named", display_name="a\x00b")), INVALID,
     "INVALID_DISPLAY_NAME"),
    ("CreateDomain", a.CreateDomainRequest(domain=a.Domain(name="described", description=MB)), INVALID,
     "DESCRIPTION_TOO_LARGE"),
    # A request without its policy reset the tenant's rules to none; a reset is asked for by name.
    ("SetContentPolicy", a.SetContentPolicyRequest(), INVALID, "CONTENT_POLICY_REQUIRED"),
    ("SetContentPolicy", a.SetContentPolicyRequest(policy=a.ContentPolicy(tenant_id="acme")), INVALID,
     "CONTENT_POLICY_REQUIRED"),
    # A 20 KB name, quoted whole, made the status too large for the client (RESOURCE_EXHAUSTED).
    ("SetContentPolicy", a.SetContentPolicyRequest(policy=a.ContentPolicy(tenant_id="acme", rules=[
        a.ContentRule(name="d" * 20_000, action=a.CONTENT_ACTION_REFUSE)])), INVALID, "UNKNOWN_DETECTOR"),
]


def _call(stub, method, request, key):
    with pytest.raises(grpc.RpcError) as err:
        getattr(stub, method)(request, metadata=[("authorization", f"Bearer {key}")])
    # An error never echoes a large input: a 1 MB domain came back as RESOURCE_EXHAUSTED (the
    # status was too large for gRPC) before.
    assert len(err.value.details()) < 300
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


@pytest.mark.parametrize("method, request_, code, reason", UNREPRESENTABLE_CASES,
                         ids=lambda v: v if isinstance(v, str) else "")
def test_values_no_layer_could_store_are_refused(channel, tenant_key, method, request_, code, reason):
    assert _call(s_grpc.MemoryServiceStub(channel), method, request_, tenant_key) == (code, reason)


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
