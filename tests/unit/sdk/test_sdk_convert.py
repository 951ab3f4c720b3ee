"""Conversion of protobuf responses into the SDK's result types, and of Python values into protos."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from memplane import (
    Kind,
    Layer,
    Memory,
    MemoryStatus,
    OperationState,
    Role,
    Scope,
    _convert,
)
from memplane.v1 import admin_service_pb2 as admin_pb
from memplane.v1 import memory_pb2, operation_pb2
from memplane.v1 import memory_service_pb2 as svc_pb

T0 = datetime(2024, 5, 1, 8, 30, 15, 250000, tzinfo=timezone.utc)


def ts(dt: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(dt)
    return out


def full_memory_pb() -> memory_pb2.Memory:
    metadata = Struct()
    metadata.update({"origin": "chat", "nested": {"n": 2}})
    return memory_pb2.Memory(
        id="m1", tenant_id="acme", scope=memory_pb2.SCOPE_PRIVATE, domain="", agent_id="bot", user_id="u1",
        session_id="s1", layer=memory_pb2.LAYER_SEMANTIC, kind=memory_pb2.KIND_FACT, content="lives in Shanghai",
        context="ctx", entity="user.address", attribute="city", value="Shanghai", tags=["a", "b"], metadata=metadata,
        confidence=0.8, status=memory_pb2.MEMORY_STATUS_ACTIVE, supersedes="m0",
        source=memory_pb2.Source(type="turn", id="t9"), occurred_at=ts(T0), valid_from=ts(T0),
        valid_to=ts(T0 + timedelta(days=1)), create_time=ts(T0), update_time=ts(T0), last_used_time=ts(T0),
        use_count=3, embedding_model="emb-1", expire_time=ts(T0 + timedelta(hours=1)),
    )


def test_memory_carries_every_proto_field():
    memory = _convert.memory(full_memory_pb())
    assert memory == Memory(
        id="m1", tenant_id="acme", scope=Scope.PRIVATE, domain="", agent_id="bot", user_id="u1", session_id="s1",
        layer=Layer.SEMANTIC, kind=Kind.FACT, content="lives in Shanghai", context="ctx", entity="user.address",
        attribute="city", value="Shanghai", tags=("a", "b"), metadata={"origin": "chat", "nested": {"n": 2.0}},
        confidence=0.8, status=MemoryStatus.ACTIVE, supersedes="m0", source_type="turn", source_id="t9",
        occurred_at=T0, valid_from=T0, valid_to=T0 + timedelta(days=1), create_time=T0, update_time=T0,
        last_used_time=T0, expire_time=T0 + timedelta(hours=1), use_count=3, embedding_model="emb-1",
    )


def test_memory_times_are_timezone_aware_utc():
    memory = _convert.memory(full_memory_pb())
    assert memory.occurred_at.tzinfo is timezone.utc


@pytest.mark.parametrize("when", [
    T0, datetime(1, 1, 1, tzinfo=timezone.utc), datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
    datetime(1969, 12, 31, 23, 59, 59, 1, tzinfo=timezone.utc), datetime(1970, 1, 1, tzinfo=timezone.utc),
])
def test_memory_times_read_as_protobufs_own_conversion_gives_them(when):
    m = memory_pb2.Memory(id="m1", occurred_at=ts(when))
    assert _convert.memory(m).occurred_at == m.occurred_at.ToDatetime(tzinfo=timezone.utc) == when


def test_memory_metadata_reads_as_json_format_reads_it():
    from google.protobuf import json_format

    m = memory_pb2.Memory(id="m1")
    m.metadata.update({"n": 3, "x": 2.5, "s": "a", "t": True, "z": None, "l": [1, "b", None, {"k": [False]}],
                       "d": {"e": {"f": -0.125}, "g": []}, "empty": {}})
    assert _convert.memory(m).metadata == json_format.MessageToDict(m.metadata)


def test_unset_times_read_as_none():
    memory = _convert.memory(memory_pb2.Memory(id="m1"))
    assert (memory.occurred_at, memory.valid_to, memory.expire_time) == (None, None, None)


def test_confidence_hides_float32_noise():
    assert _convert.memory(memory_pb2.Memory(confidence=0.7)).confidence == 0.7


def test_unknown_enum_numbers_read_as_unspecified():
    memory = _convert.memory(memory_pb2.Memory(kind=42))
    assert memory.kind is Kind.UNSPECIFIED


def test_to_timestamp_converts_offsets_to_utc():
    shanghai = datetime(2024, 5, 1, 16, 30, 15, 250000, tzinfo=timezone(timedelta(hours=8)))
    assert _convert.to_timestamp(shanghai) == ts(T0)


def test_to_timestamp_rejects_naive_datetimes():
    with pytest.raises(ValueError, match="timezone-aware"):
        _convert.to_timestamp(datetime(2024, 5, 1))


@pytest.mark.parametrize("ttl", [90, 90.0, timedelta(seconds=90)])
def test_to_duration_accepts_seconds_and_timedeltas(ttl):
    assert _convert.to_duration(ttl).seconds == 90


def test_search_hits_keep_score_and_explanation():
    hit = svc_pb.SearchHit(
        memory=memory_pb2.Memory(id="m1"),
        score=0.42,
        explanation=svc_pb.ScoreExplanation(components=[svc_pb.ScoreComponent(name="vector", value=0.9, rank=1)]),
    )
    result = _convert.search_result(svc_pb.SearchResponse(hits=[hit]))
    assert result.hits[0].memory.id == "m1" and result.hits[0].score == 0.42
    assert [(c.name, c.value, c.rank) for c in result.hits[0].explanation] == [("vector", 0.9, 1)]


def test_write_without_background_extraction_has_no_operation():
    result = _convert.write_result(svc_pb.WriteResponse(memories=[memory_pb2.Memory(id="m1")]))
    assert result.operation is None and [m.id for m in result.memories] == ["m1"]


def test_write_says_when_its_extraction_went_without_the_model():
    result = _convert.write_result(svc_pb.WriteResponse(memories=[memory_pb2.Memory(id="m1")],
                                                        extraction_degraded="the model answered malformed"))
    assert result.extraction_degraded == "the model answered malformed" and result.extracted == ()


def test_reflection_counts_the_models_memories_it_did_not_store_by_why():
    response = svc_pb.ReflectResponse(result=svc_pb.ReflectResult(summary="s", dropped={"ungrounded": 2, "narration": 1}))
    assert _convert.reflect_result(response).dropped == {"ungrounded": 2, "narration": 1}


def test_background_reflection_carries_its_operation():
    response = svc_pb.ReflectResponse(
        operation=operation_pb2.Operation(id="op1", state=operation_pb2.OPERATION_STATE_PENDING)
    )
    result = _convert.reflect_result(response)
    assert result.operation.id == "op1" and result.operation.state is OperationState.PENDING
    assert not result.operation.done


def test_created_tenant_without_admin_key_has_none():
    result = _convert.created_tenant(admin_pb.CreateTenantResponse(tenant=admin_pb.Tenant(id="acme")))
    assert result.tenant.id == "acme" and result.admin_key is None


def test_created_api_key_keeps_the_secret_out_of_repr():
    response = admin_pb.CreateApiKeyResponse(
        api_key=admin_pb.ApiKey(id="k1", role=admin_pb.ROLE_WRITER), secret="mp_k1_topsecret"
    )
    created = _convert.created_api_key(response)
    assert created.secret == "mp_k1_topsecret" and created.api_key.role is Role.WRITER
    assert "topsecret" not in repr(created)


def test_page_converts_items_and_keeps_the_token():
    page = _convert.page([admin_pb.Domain(name="law")], _convert.domain, "next")
    assert [d.name for d in page.items] == ["law"] and page.next_page_token == "next"


def test_stats_counts_are_keyed_by_name():
    response = svc_pb.GetStatsResponse(total=3, by_kind=[svc_pb.StatCount(key="KIND_FACT", count=3)])
    stats = _convert.stats(response)
    assert stats.total == 3 and stats.by_kind == {"KIND_FACT": 3} and stats.newest_time is None


def test_usage_converts_by_tenant_and_day_and_exports_one_row_a_figure():
    from memplane.enums import Layer, Scope

    day = admin_pb.DayUsage(day="2026-12-07", texts_embedded=12, calls={"Write": 3, "Search": 5},
                            tokens={"extraction": 900},
                            stored=[admin_pb.StoredUsage(layer=memory_pb2.LAYER_SEMANTIC, scope=memory_pb2.SCOPE_GLOBAL,
                                                         memories=4, bytes=8192)])
    report = _convert.usage_report(admin_pb.GetUsageResponse(
        start_day="2026-11-08", end_day="2026-12-07", tenants=[admin_pb.TenantUsage(tenant_id="acme", days=[day])]))
    [tenant] = report.tenants
    assert tenant.days[0].stored[0].layer is Layer.SEMANTIC and tenant.days[0].stored[0].scope is Scope.GLOBAL
    assert report.rows() == [
        ("acme", "2026-12-07", "calls", "Search", 5), ("acme", "2026-12-07", "calls", "Write", 3),
        ("acme", "2026-12-07", "texts_embedded", "", 12), ("acme", "2026-12-07", "llm_tokens", "extraction", 900),
        ("acme", "2026-12-07", "memories_stored", "semantic/global", 4),
        ("acme", "2026-12-07", "bytes_stored", "semantic/global", 8192)]
