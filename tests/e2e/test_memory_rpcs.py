"""Each MemoryService RPC over a real socket through the SDK: success and bad input."""
from __future__ import annotations

import time

import grpc
import pytest

from memplane import AsyncMemoryClient, MemoryClient, MemoryInput, MemoryStatus, WriteOutcome
from memplane.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError, UnauthenticatedError
from memplane.v1 import memory_pb2, memory_service_pb2, memory_service_pb2_grpc


@pytest.fixture
def client(server, new_tenant):
    tenant, key = new_tenant()
    with MemoryClient(server.target, key, agent_id="a1") as c:
        yield c


@pytest.fixture
def stub(server):
    with grpc.insecure_channel(server.target) as channel:
        yield memory_service_pb2_grpc.MemoryServiceStub(channel)


def reason_of(excinfo) -> str:
    return excinfo.value.reason


def raw_error(stub, method: str, request, key: str) -> tuple[grpc.StatusCode, str]:
    """Sends a request the SDK would refuse to build, and returns the status code and ErrorInfo reason."""
    from memplane.errors import from_rpc_error

    with pytest.raises(grpc.RpcError) as err:
        getattr(stub, method)(request, metadata=[("authorization", f"Bearer {key}")])
    return err.value.code(), from_rpc_error(err.value).reason


def test_write_then_search_finds_it(client):
    written = client.write([MemoryInput("Deploys need the VPN on", kind="lesson", scope="global"),
                            {"content": "I like dark mode", "kind": "preference"}])
    assert [m.scope.name for m in written.memories] == ["GLOBAL", "PRIVATE"]
    hits = client.search("how do deploys work", top_k=2, explain=True).hits
    assert hits[0].memory.content == "Deploys need the VPN on"
    assert {c.name for c in hits[0].explanation} >= {"vector", "rrf"}


def test_a_write_answer_says_which_item_was_merged_into_which_memory_and_why(client):
    [first] = client.write([MemoryInput("Turn the alarm on at night", kind="fact", scope="global")]).memories
    written = client.write([MemoryInput("turn the alarm on at night.", kind="fact", scope="global"),
                            MemoryInput("Turn the alarm off at night", kind="fact", scope="global")])
    merged, kept = written.results
    assert merged.outcome is WriteOutcome.MERGED and merged.related_memory_id == first.id
    assert written.memories[0].id == first.id and "case" in merged.reason
    assert kept.outcome is WriteOutcome.CREATED and written.memories[1].content == "Turn the alarm off at night"


async def test_the_async_client_reads_the_same_outcomes(server, new_tenant):
    _, key = new_tenant()
    async with AsyncMemoryClient(server.target, key, agent_id="a1") as c:
        await c.write([MemoryInput("Refunds over 100 dollars need approval", kind="lesson")])
        written = await c.write([MemoryInput("Refunds under 100 dollars need approval", kind="lesson"),
                                 MemoryInput("Refunds over 100 dollars need approval", kind="lesson")])
    assert [r.outcome for r in written.results] == [WriteOutcome.CREATED, WriteOutcome.MERGED]


@pytest.mark.parametrize("memory, reason", [
    ({"content": "", "kind": "fact"}, "CONTENT_REQUIRED"),
    ({"content": "x" * 40_000, "kind": "fact"}, "CONTENT_TOO_LARGE"),
    ({"content": "bad ttl", "kind": "turn", "layer": "working", "session_id": "s", "ttl": -5}, "INVALID_TTL"),
])
def test_write_bad_input_is_invalid_argument(client, memory, reason):
    with pytest.raises(InvalidArgumentError) as err:
        client.write([memory])
    assert reason_of(err) == reason


def test_write_missing_kind_is_invalid_argument(stub, tenant_key):
    request = memory_service_pb2.WriteRequest(memories=[memory_service_pb2.MemoryInput(content="x")])
    with pytest.raises(grpc.RpcError) as err:
        stub.Write(request, metadata=[("authorization", f"Bearer {tenant_key}")])
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT and "kind" in err.value.details()


def test_write_unknown_enum_value_is_invalid_argument(stub, tenant_key):
    request = memory_service_pb2.WriteRequest(memories=[memory_service_pb2.MemoryInput(kind=99, content="x")])
    with pytest.raises(grpc.RpcError) as err:
        stub.Write(request, metadata=[("authorization", f"Bearer {tenant_key}")])
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_write_with_a_request_id_returns_the_first_response(client):
    first = client.write([{"content": "once only", "kind": "fact"}], request_id="fixed-id-1")
    again = client.write([{"content": "once only", "kind": "fact"}], request_id="fixed-id-1")
    assert [m.id for m in again.memories] == [m.id for m in first.memories]
    assert client.get_stats().total == 1


def test_infer_without_an_llm_is_failed_precondition(client):
    with pytest.raises(FailedPreconditionError) as err:
        client.write([{"content": "I moved", "kind": "turn", "session_id": "s"}], infer="sync")
    assert reason_of(err) == "LLM_NOT_CONFIGURED"


@pytest.mark.parametrize("query, reason", [("", "QUERY_REQUIRED"), ("   ", "QUERY_REQUIRED"),
                                           ("q" * 100_000, "QUERY_TOO_LARGE")])
def test_search_bad_query_is_invalid_argument(client, query, reason):
    with pytest.raises(InvalidArgumentError) as err:
        client.search(query)
    assert reason_of(err) == reason


def test_search_unknown_scope_in_filter_is_invalid_argument(stub, tenant_key):
    request = memory_service_pb2.SearchRequest(query="x", filter=memory_pb2.MemoryFilter(scopes=[42]))
    with pytest.raises(grpc.RpcError) as err:
        stub.Search(request, metadata=[("authorization", f"Bearer {tenant_key}")])
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_reflect_on_a_session_merges_and_summarises(client):
    client.write([{"content": "The user lives in Shanghai", "kind": "fact", "session_id": "s1",
                   "entity": "user", "attribute": "city", "value": "Shanghai"}])
    result = client.reflect(session_id="s1")
    assert "user.city = Shanghai" in result.summary and result.memories[-1].kind.name == "SUMMARY"


def test_reflect_async_returns_an_operation_that_completes(client):
    result = client.reflect(task={"task_id": "t1", "request": "Rotate the keys", "outcome": "success"}, mode="async")
    assert result.operation is not None
    done = client.wait_operation(result.operation.id, timeout=30)
    assert done.state.name == "SUCCEEDED" and done.result_memory_ids


@pytest.mark.parametrize("request_, reason", [
    (memory_service_pb2.ReflectRequest(), "INPUT_REQUIRED"),
    (memory_service_pb2.ReflectRequest(session=memory_service_pb2.SessionSelector(session_id=" ")), "SESSION_REQUIRED"),
    (memory_service_pb2.ReflectRequest(task=memory_service_pb2.TaskTrajectory(task_id="t")), "REQUEST_REQUIRED"),
    (memory_service_pb2.ReflectRequest(task=memory_service_pb2.TaskTrajectory(request="r", outcome=7)),
     "UNKNOWN_ENUM_VALUE"),
])
def test_reflect_bad_input_is_invalid_argument(stub, tenant_key, request_, reason):
    assert raw_error(stub, "Reflect", request_, tenant_key) == (grpc.StatusCode.INVALID_ARGUMENT, reason)


def test_forget_by_id_and_filter(client):
    written = client.write([{"content": f"temp {i}", "kind": "event", "user_id": "u9"} for i in range(3)])
    assert client.forget(ids=[written.memories[0].id]).forgotten_count == 1
    assert client.forget(user_id="u9", hard=True).forgotten_count == 3
    assert client.get_stats().total == 0


@pytest.mark.parametrize("request_, reason", [
    (memory_service_pb2.ForgetRequest(), "TARGET_REQUIRED"),
    (memory_service_pb2.ForgetRequest(ids=memory_service_pb2.MemoryIds()), "IDS_REQUIRED"),
    (memory_service_pb2.ForgetRequest(filter=memory_pb2.MemoryFilter()), "FILTER_REQUIRED"),
    (memory_service_pb2.ForgetRequest(filter=memory_pb2.MemoryFilter(kinds=[77])), "UNKNOWN_ENUM_VALUE"),
])
def test_forget_bad_input_is_invalid_argument(stub, tenant_key, request_, reason):
    assert raw_error(stub, "Forget", request_, tenant_key) == (grpc.StatusCode.INVALID_ARGUMENT, reason)


def test_get_unknown_or_malformed_id_is_not_found(client):
    for bad in ("6f1c1f0e-0000-4000-8000-000000000000", "not-a-uuid"):
        with pytest.raises(NotFoundError) as err:
            client.get_memory(bad)
        assert reason_of(err) == "MEMORY_NOT_FOUND"


def test_a_failed_task_lowers_the_confidence_of_the_lesson_it_used_and_says_so(client):
    [lesson] = client.write([{"content": "Retry the upload twice", "kind": "lesson", "confidence": 0.8}]).memories
    [after] = client.submit_feedback([lesson.id], outcome="failure", task_id="upload-1")
    assert after.confidence == pytest.approx(0.68) and after.status is MemoryStatus.PENDING
    assert client.list_history(memory_id=lesson.id).items[0].reason.startswith("used in task upload-1, failure")


def test_update_list_history_feedback_stats_and_working_memory(client):
    [m] = client.write([{"content": "Standup at 9", "kind": "fact", "session_id": "s2"}]).memories
    updated = client.update_memory(m.id, content="Standup at 10", tags=["team"])
    assert updated.content == "Standup at 10" and updated.tags == ("team",)
    history = client.list_history(memory_id=m.id)
    assert [e.action.name for e in history.items] == ["UPDATED", "CREATED"]
    assert client.submit_feedback([m.id], useful=False)[0].confidence == pytest.approx(0.9)
    assert [x.id for x in client.list_memories(page_size=10).items] == [m.id]
    client.write([{"content": "editing README", "kind": "turn", "layer": "working", "session_id": "s2",
                   "state_key": "file"}])
    working = client.get_working_memory("s2")
    assert working.state == {"file": "editing README"} and len(working.items) == 1
    assert client.get_stats().total == 1
    promoted = client.close_session("s2")
    assert [m.layer.name for m in promoted] == ["EPISODIC", "EPISODIC"]
    assert client.get_working_memory("s2").items == ()


def test_update_bad_input(client):
    [m] = client.write([{"content": "x", "kind": "fact"}]).memories
    with pytest.raises(InvalidArgumentError):
        client.update_memory(m.id, confidence=1.5)
    with pytest.raises(InvalidArgumentError):
        client.update_memory(m.id, content="")
    with pytest.raises(NotFoundError):
        client.update_memory("6f1c1f0e-0000-4000-8000-000000000000", content="y")


def test_no_api_key_is_unauthenticated(stub):
    with pytest.raises(grpc.RpcError) as err:
        stub.Search(memory_service_pb2.SearchRequest(query="x"))
    assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED


def test_bad_api_key_is_unauthenticated(server):
    with MemoryClient(server.target, "mpk_0000_bogus") as c, pytest.raises(UnauthenticatedError):
        c.search("x")


def test_another_tenants_memory_id_is_not_found_and_reveals_nothing(server, new_tenant):
    (_, key_a), (_, key_b) = new_tenant(), new_tenant()
    with MemoryClient(server.target, key_a) as a, MemoryClient(server.target, key_b) as b:
        [secret] = a.write([{"content": "A's secret roadmap", "kind": "fact"}]).memories
        with pytest.raises(NotFoundError) as err:
            b.get_memory(secret.id)
        assert "roadmap" not in str(err.value) and err.value.metadata == {}
        with pytest.raises(NotFoundError) as unknown:
            b.get_memory("6f1c1f0e-0000-4000-8000-000000000000")
        assert (err.value.reason, err.value.message) == (unknown.value.reason, unknown.value.message)
        with pytest.raises(NotFoundError):
            b.update_memory(secret.id, content="mine now")
        with pytest.raises(NotFoundError) as forget_err:
            b.forget(ids=[secret.id], hard=True)
        assert forget_err.value.reason == unknown.value.reason
        assert b.search("secret roadmap").hits == ()
        assert a.get_memory(secret.id).content == "A's secret roadmap"


def test_server_keeps_serving_after_bad_input(client):
    with pytest.raises(InvalidArgumentError):
        client.search("")
    client.write([{"content": "still alive", "kind": "fact"}])
    assert client.search("alive").hits


def test_the_server_builds_turn_windows_in_the_background_and_search_uses_them(client):
    client.write([
        {"content": "Ana: where did you go last weekend?", "kind": "turn", "session_id": "trip"},
        {"content": "Ben: we camped by Lake Tahoe", "kind": "turn", "session_id": "trip"},
    ])
    deadline = time.monotonic() + 60
    while client.get_stats().sessions_awaiting_context:
        assert time.monotonic() < deadline, "the server never built the windows"
        time.sleep(0.2)
    hits = client.search("Tahoe", session_id="trip", explain=True).hits
    question = next(h for h in hits if h.memory.content.startswith("Ana"))
    assert "keyword_context" in {c.name for c in question.explanation}
