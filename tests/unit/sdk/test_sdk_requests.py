"""Building requests from SDK arguments: filters, memory inputs, field masks and argument rules."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memplane import (
    Kind,
    MemoryInput,
    MemoryStatus,
    Scope,
    TaskStep,
    TaskTrajectory,
    _admin_requests,
    _messages,
    _requests,
)
from memplane.v1 import admin_service_pb2 as admin_pb
from memplane.v1 import memory_pb2
from memplane.v1 import memory_service_pb2 as svc_pb

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)


def test_filter_accepts_single_values_and_names():
    pb = _messages.memory_filter({"scopes": "private", "kinds": ["fact", Kind.LESSON], "tags": "urgent"})
    assert list(pb.scopes) == [memory_pb2.SCOPE_PRIVATE]
    assert list(pb.kinds) == [memory_pb2.KIND_FACT, memory_pb2.KIND_LESSON]
    assert list(pb.tags) == ["urgent"]


def test_filter_occurred_bounds_become_a_time_range():
    pb = _messages.memory_filter({"occurred_after": T0, "occurred_before": T0 + timedelta(days=1)})
    assert pb.occurred.start_time.seconds == int(T0.timestamp())
    assert pb.occurred.end_time.seconds == int(T0.timestamp()) + 86400


def test_filter_keywords_left_out_or_none_do_not_constrain():
    assert _messages.memory_filter({"user_id": None, "scopes": None}) == memory_pb2.MemoryFilter()


def test_filter_rejects_unknown_keywords():
    with pytest.raises(TypeError, match="scope"):
        _messages.memory_filter({"scope": "private"})


def test_memory_input_from_a_dict_with_proto_field_names():
    pb = _messages.memory_input({
        "content": "likes tea", "kind": "preference", "scope": "SCOPE_GLOBAL", "tags": ["drinks"],
        "source": {"type": "turn", "id": "t1"}, "metadata": {"k": "v"}, "occurred_at": T0, "ttl": 60,
    })
    assert (pb.kind, pb.scope, list(pb.tags)) == (memory_pb2.KIND_PREFERENCE, memory_pb2.SCOPE_GLOBAL, ["drinks"])
    assert (pb.source.type, pb.source.id, pb.metadata["k"], pb.ttl.seconds) == ("turn", "t1", "v", 60)


def test_memory_input_from_the_dataclass_matches_the_dict_form():
    item = MemoryInput("likes tea", "preference", user_id="u1", valid_from=T0)
    assert _messages.memory_input(item) == _messages.memory_input(
        {"content": "likes tea", "kind": "preference", "user_id": "u1", "valid_from": T0}
    )


def test_zero_confidence_is_sent_because_unset_means_one():
    assert _messages.memory_input({"content": "x", "kind": "fact", "confidence": 0.0}).HasField("confidence")
    assert not _messages.memory_input({"content": "x", "kind": "fact"}).HasField("confidence")


def test_memory_input_rejects_unknown_fields():
    with pytest.raises(TypeError, match="colour"):
        _messages.memory_input({"content": "x", "kind": "fact", "colour": "red"})


def test_memory_input_requires_kind():
    with pytest.raises(TypeError, match="kind"):
        _messages.memory_input({"content": "x"})


def test_memory_input_rejects_naive_datetimes():
    with pytest.raises(ValueError):
        _messages.memory_input({"content": "x", "kind": "event", "occurred_at": datetime(2024, 5, 1)})


def test_write_rejects_a_single_memory_not_in_a_list():
    with pytest.raises(TypeError, match="write_one"):
        _requests.write({"content": "x", "kind": "fact"}, request_id=None, infer=None, time_zone=None)


def test_write_rejects_an_empty_batch():
    with pytest.raises(ValueError):
        _requests.write([], request_id=None, infer=None, time_zone=None)


def test_write_sets_infer_and_time_zone():
    call = _requests.write([{"content": "x", "kind": "turn"}], request_id="r1", infer="async", time_zone="UTC")
    assert call.method == "Write"
    assert (call.request.request_id, call.request.infer, call.request.time_zone) == (
        "r1", svc_pb.INFER_MODE_ASYNC, "UTC"
    )


def test_write_one_resolves_to_the_first_stored_memory():
    call = _requests.write_one("x", kind="fact", request_id=None, scope="private")
    memory = call.convert(svc_pb.WriteResponse(memories=[memory_pb2.Memory(id="m1", scope=memory_pb2.SCOPE_PRIVATE)]))
    assert (memory.id, memory.scope) == ("m1", Scope.PRIVATE)
    assert call.request.memories[0].scope == memory_pb2.SCOPE_PRIVATE


def test_search_keeps_scope_weight_order_and_as_of():
    call = _requests.search(
        "q", top_k=5, token_budget=0, as_of=T0, scope_weights={"private": 2.0, Scope.GLOBAL: 0.5},
        explain=True, time_zone=None, filters={"user_id": "u1"},
    )
    assert [(w.scope, w.weight) for w in call.request.scope_weights] == [
        (memory_pb2.SCOPE_PRIVATE, 2.0), (memory_pb2.SCOPE_GLOBAL, 0.5)
    ]
    assert call.request.as_of_time.seconds == int(T0.timestamp())
    assert (call.request.top_k, call.request.explain, call.request.filter.user_id) == (5, True, "u1")


def test_update_mask_names_exactly_the_given_fields():
    call = _requests.update_memory("m1", content="new", tags=[], status="deleted", valid_to=T0)
    assert list(call.request.update_mask.paths) == ["content", "tags", "status", "valid_to"]
    assert call.request.memory.id == "m1"
    assert call.request.memory.status == memory_pb2.MEMORY_STATUS_DELETED


def test_update_mask_includes_fields_set_to_empty_values_to_clear_them():
    call = _requests.update_memory("m1", context="", confidence=0.0)
    assert list(call.request.update_mask.paths) == ["context", "confidence"]


def test_update_without_fields_is_rejected():
    with pytest.raises(ValueError):
        _requests.update_memory("m1", request_id="r1")


def test_update_rejects_fields_it_cannot_change():
    with pytest.raises(TypeError):
        _requests.update_memory("m1", kind="fact")


def test_update_status_accepts_the_enum():
    call = _requests.update_memory("m1", status=MemoryStatus.ACTIVE)
    assert call.request.memory.status == memory_pb2.MEMORY_STATUS_ACTIVE


def test_forget_by_ids_accepts_one_id():
    call = _requests.forget(ids="m1", hard=True, dry_run=False, reason="gdpr", request_id=None, filters={})
    assert list(call.request.ids.ids) == ["m1"] and call.request.hard and call.request.WhichOneof("target") == "ids"


def test_forget_by_filter_sets_the_filter_target():
    call = _requests.forget(ids=None, hard=False, dry_run=True, reason="", request_id=None, filters={"user_id": "u1"})
    assert call.request.WhichOneof("target") == "filter" and call.request.filter.user_id == "u1"


@pytest.mark.parametrize(
    ("ids", "filters"), [(None, {}), (None, {"user_id": None}), (["m1"], {"user_id": "u1"})]
)
def test_forget_needs_ids_or_filter_but_not_both(ids, filters):
    with pytest.raises(ValueError):
        _requests.forget(ids=ids, hard=False, dry_run=False, reason="", request_id=None, filters=filters)


def test_reflect_on_a_task_given_as_a_dict():
    task = {"request": "book a flight", "outcome": "failure", "steps": [{"action": "search", "observation": "none"}]}
    call = _requests.reflect(
        task=task, session_id=None, user_id=None, scope=None, domain=None, mode="async", request_id=None
    )
    assert call.request.task.outcome == svc_pb.TASK_OUTCOME_FAILURE
    assert call.request.task.steps[0].action == "search"
    assert call.request.mode == svc_pb.REFLECT_MODE_ASYNC


def test_reflect_on_a_task_dataclass_converts_step_times():
    task = TaskTrajectory(request="r", task_id="t1", steps=[TaskStep("act", occurred_at=T0)])
    call = _requests.reflect(
        task=task, session_id=None, user_id=None, scope=None, domain=None, mode=None, request_id=None
    )
    assert call.request.task.task_id == "t1"
    assert call.request.task.steps[0].occurred_at.seconds == int(T0.timestamp())


def test_reflect_on_a_session_selects_it():
    call = _requests.reflect(
        task=None, session_id="s1", user_id="u1", scope="domain", domain="law", mode=None, request_id=None
    )
    assert (call.request.session.session_id, call.request.session.user_id) == ("s1", "u1")
    assert (call.request.scope, call.request.domain) == (memory_pb2.SCOPE_DOMAIN, "law")


@pytest.mark.parametrize(("task", "session_id"), [(None, None), ({"request": "r"}, "s1")])
def test_reflect_needs_exactly_one_input(task, session_id):
    with pytest.raises(ValueError):
        _requests.reflect(
            task=task, session_id=session_id, user_id=None, scope=None, domain=None, mode=None, request_id=None
        )


def test_history_of_an_entity_carries_the_attribute():
    call = _requests.list_history(memory_id=None, entity="user.address", attribute="city", page_size=10, page_token="")
    assert (call.request.entity.entity, call.request.entity.attribute) == ("user.address", "city")


@pytest.mark.parametrize(
    ("memory_id", "entity", "attribute"), [(None, None, None), ("m1", "e", None), ("m1", None, "city")]
)
def test_history_needs_exactly_one_subject(memory_id, entity, attribute):
    with pytest.raises(ValueError):
        _requests.list_history(memory_id=memory_id, entity=entity, attribute=attribute, page_size=0, page_token="")


def test_feedback_accepts_one_id():
    call = _requests.submit_feedback("m1", useful=False, outcome=None, task_id="", comment="wrong")
    assert list(call.request.memory_ids) == ["m1"] and call.request.useful is False


def test_feedback_with_an_outcome_names_the_task():
    call = _requests.submit_feedback(["m1"], useful=None, outcome="failure", task_id="t9", comment="")
    assert call.request.outcome == svc_pb.TASK_OUTCOME_FAILURE and call.request.task_id == "t9"


@pytest.mark.parametrize("useful, outcome", [(None, None), (True, "success")])
def test_feedback_needs_exactly_one_of_useful_or_outcome(useful, outcome):
    with pytest.raises(ValueError):
        _requests.submit_feedback(["m1"], useful=useful, outcome=outcome, task_id="", comment="")


def test_api_key_role_accepts_a_name():
    call = _admin_requests.create_api_key(tenant_id="acme", agent_id=None, role="tenant_admin", display_name="")
    assert call.request.role == admin_pb.ROLE_TENANT_ADMIN and call.request.agent_id == ""


def test_domain_grant_access_accepts_a_name():
    call = _admin_requests.grant_domain("law", "acme", "read_write")
    assert call.request.grant.access == admin_pb.DOMAIN_ACCESS_READ_WRITE


def test_create_tenant_nests_the_tenant():
    call = _admin_requests.create_tenant("acme", display_name="Acme", max_memories=10, create_admin_key=True)
    assert call.request == admin_pb.CreateTenantRequest(
        tenant=admin_pb.Tenant(id="acme", display_name="Acme", max_memories=10), create_admin_key=True
    )
