"""Protobuf <-> domain translation (api/convert.py)."""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from uuid import uuid4

import pytest

from memplane.v1 import memory_pb2, memory_service_pb2
from memplane_server.api.convert import (
    KINDS,
    LAYERS,
    SCOPES,
    STATUSES,
    draft_in,
    enum_in,
    enum_out,
    enums_in,
    filter_in,
    memory_out,
    struct_in,
)
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, Layer, MemoryDraft, MemoryRecord, Scope, Status

UTC = timezone.utc


def _error(fn, *args) -> MemplaneError:
    with pytest.raises(MemplaneError) as exc:
        fn(*args)
    assert exc.value.code is Code.INVALID_ARGUMENT
    return exc.value


# --- enums ------------------------------------------------------------------------------

def test_enum_in_unspecified_is_none():
    assert enum_in(SCOPES, 0, "scope") is None


def test_enum_in_maps_known_numbers():
    assert enum_in(SCOPES, memory_pb2.SCOPE_DOMAIN, "scope") is Scope.DOMAIN
    assert enum_in(KINDS, memory_pb2.KIND_LESSON, "kind") is Kind.LESSON


def test_enum_in_unknown_number_is_unknown_enum_value_naming_the_field():
    err = _error(enum_in, KINDS, 999, "kind")
    assert err.reason == "UNKNOWN_ENUM_VALUE"
    assert err.metadata == {"field": "kind"}


def test_enums_in_rejects_unspecified_in_a_list():
    err = _error(enums_in, LAYERS, [memory_pb2.LAYER_SEMANTIC, 0], "layers")
    assert err.reason == "UNKNOWN_ENUM_VALUE"


@pytest.mark.parametrize("table", [SCOPES, LAYERS, KINDS, STATUSES])
def test_every_domain_enum_value_has_a_proto_number_and_back(table):
    for number, value in table.items():
        assert enum_out(table, value) == number
        assert enum_in(table, number, "f") is value
    assert len(set(table.values())) == len(type(next(iter(table.values()))))


def test_enum_out_of_none_is_unspecified():
    assert enum_out(SCOPES, None) == 0


# --- draft_in ---------------------------------------------------------------------------

def _ts(dt: datetime):
    from google.protobuf.timestamp_pb2 import Timestamp
    t = Timestamp()
    t.FromDatetime(dt)
    return t


def full_input() -> memory_service_pb2.MemoryInput:
    m = memory_service_pb2.MemoryInput(
        scope=memory_pb2.SCOPE_DOMAIN, domain="travel", layer=memory_pb2.LAYER_WORKING, kind=memory_pb2.KIND_FACT,
        content="Flight is at 9", context="trip to Lyon", entity="flight", attribute="time", value="09:00",
        tags=["trip", "lyon"], confidence=0.25, user_id="u1", session_id="s1",
        source=memory_pb2.Source(type="task", id="t9"),
        occurred_at=_ts(datetime(2024, 5, 1, 8, 0, tzinfo=UTC)),
        valid_from=_ts(datetime(2024, 5, 1, tzinfo=UTC)),
        valid_to=_ts(datetime(2024, 5, 2, tzinfo=UTC)),
        state_key="flight_time",
    )
    m.metadata.update({"k": "v", "n": 2})
    m.ttl.seconds = 90
    return m


def test_draft_in_maps_every_field():
    assert draft_in(full_input()) == MemoryDraft(
        scope=Scope.DOMAIN, domain="travel", agent_id=None, layer=Layer.WORKING, kind=Kind.FACT,
        content="Flight is at 9", context="trip to Lyon", entity="flight", attribute="time", value="09:00",
        tags=("trip", "lyon"), metadata={"k": "v", "n": 2.0}, confidence=0.25, user_id="u1", session_id="s1",
        source_type="task", source_id="t9", occurred_at=datetime(2024, 5, 1, 8, 0, tzinfo=UTC),
        valid_from=datetime(2024, 5, 1, tzinfo=UTC), valid_to=datetime(2024, 5, 2, tzinfo=UTC), ttl_seconds=90,
        state_key="flight_time",
    )


def test_draft_in_of_empty_input_uses_none_and_defaults():
    d = draft_in(memory_service_pb2.MemoryInput(content="x"))
    assert (d.scope, d.layer, d.kind, d.domain, d.entity, d.user_id, d.source_type) == (None,) * 7
    assert d.confidence == 1.0
    assert d.metadata == {}
    assert d.occurred_at is None and d.ttl_seconds is None


def test_draft_in_explicit_zero_confidence_is_kept():
    assert draft_in(memory_service_pb2.MemoryInput(content="x", confidence=0.0)).confidence == 0.0


def test_draft_in_timestamps_are_utc_aware():
    d = draft_in(full_input())
    assert d.occurred_at.tzinfo is not None
    assert d.occurred_at.utcoffset() == timedelta(0)


def test_draft_in_unknown_kind_is_rejected():
    err = _error(draft_in, memory_service_pb2.MemoryInput(content="x", kind=42))
    assert err.reason == "UNKNOWN_ENUM_VALUE"


@pytest.mark.parametrize("seconds,nanos", [(0, 0), (-5, 0), (0, -1)])
def test_non_positive_ttl_is_invalid_ttl(seconds, nanos):
    m = memory_service_pb2.MemoryInput(content="x")
    m.ttl.seconds, m.ttl.nanos = seconds, nanos
    err = _error(draft_in, m)
    assert err.reason == "INVALID_TTL"


def test_sub_second_ttl_rounds_up_to_one_second():
    m = memory_service_pb2.MemoryInput(content="x")
    m.ttl.nanos = 1
    assert draft_in(m).ttl_seconds == 1


# --- struct_in --------------------------------------------------------------------------

def test_struct_in_rejects_nul_in_values():
    m = memory_service_pb2.MemoryInput()
    m.metadata.update({"note": "a\x00b"})
    err = _error(struct_in, m, "metadata")
    assert (err.reason, err.metadata) == ("INVALID_METADATA", {"field": "metadata"})


def test_struct_in_rejects_nul_in_keys():
    m = memory_service_pb2.MemoryInput()
    m.metadata.update({"a\x00": 1})
    assert _error(struct_in, m, "metadata").reason == "INVALID_METADATA"


def test_struct_in_returns_nested_json():
    m = memory_service_pb2.MemoryInput()
    m.metadata.update({"a": {"b": [1, "two", True, None]}})
    assert struct_in(m, "metadata") == {"a": {"b": [1.0, "two", True, None]}}


def test_struct_in_accepts_escaped_looking_text_without_nul():
    m = memory_service_pb2.MemoryInput()
    m.metadata.update({"snippet": 'printf("\\u0000")'})
    assert struct_in(m, "metadata") == {"snippet": 'printf("\\u0000")'}


# --- filter_in --------------------------------------------------------------------------

def test_filter_in_nan_min_confidence_is_invalid_confidence():
    assert _error(filter_in, memory_pb2.MemoryFilter(min_confidence=math.nan)).reason == "INVALID_CONFIDENCE"


@pytest.mark.parametrize("value", [-0.5, 1.5])
def test_filter_in_min_confidence_outside_unit_interval_is_invalid(value):
    assert _error(filter_in, memory_pb2.MemoryFilter(min_confidence=value)).reason == "INVALID_CONFIDENCE"


def test_filter_in_maps_fields():
    f = memory_pb2.MemoryFilter(
        scopes=[memory_pb2.SCOPE_GLOBAL, memory_pb2.SCOPE_PRIVATE], kinds=[memory_pb2.KIND_FACT],
        domains=["travel"], agent_id="bot", tags=["t"], min_confidence=0.5, include_pending=True,
        statuses=[memory_pb2.MEMORY_STATUS_SUPERSEDED],
        occurred=memory_pb2.TimeRange(start_time=_ts(datetime(2024, 1, 1, tzinfo=UTC))),
    )
    out = filter_in(f)
    assert out.scopes == (Scope.GLOBAL, Scope.PRIVATE)
    assert out.kinds == (Kind.FACT,)
    assert (out.domains, out.agent_id, out.tags) == (("travel",), "bot", ("t",))
    assert out.min_confidence == 0.5 and out.include_pending
    assert out.statuses == (Status.SUPERSEDED,)
    assert out.occurred_after == datetime(2024, 1, 1, tzinfo=UTC)
    assert out.occurred_before is None


def test_filter_in_of_empty_filter_is_the_empty_filter():
    assert filter_in(memory_pb2.MemoryFilter()).is_empty()


# --- memory_out -------------------------------------------------------------------------

def record(**overrides) -> MemoryRecord:
    values = dict(
        id=uuid4(), tenant_id="acme", scope=Scope.PRIVATE, domain=None, agent_id="bot", user_id="u1",
        session_id="s1", layer=Layer.SEMANTIC, kind=Kind.PREFERENCE, content="likes tea", context="mornings",
        entity=None, attribute=None, value=None, tags=["drink"], metadata={"k": "v"}, confidence=0.75,
        status=Status.PENDING, supersedes=None, source_type="turn", source_id="42",
        occurred_at=datetime(2024, 5, 1, 16, 0, tzinfo=timezone(timedelta(hours=8))),
        valid_from=None, valid_to=None, created_at=datetime(2024, 5, 1, 8, 0, 1, 500000, tzinfo=UTC),
        updated_at=datetime(2024, 5, 1, 8, 0, 2, tzinfo=UTC), use_count=3, embedding_model="e5",
    )
    values.update(overrides)
    return MemoryRecord(**values)


def test_memory_out_maps_fields_and_enums():
    r = record()
    m = memory_out(r)
    assert m.id == str(r.id) and m.tenant_id == "acme" and m.agent_id == "bot"
    assert (m.scope, m.layer, m.kind, m.status) == (
        memory_pb2.SCOPE_PRIVATE, memory_pb2.LAYER_SEMANTIC, memory_pb2.KIND_PREFERENCE,
        memory_pb2.MEMORY_STATUS_PENDING,
    )
    assert (m.content, m.context, list(m.tags), dict(m.metadata)) == ("likes tea", "mornings", ["drink"], {"k": "v"})
    assert m.confidence == 0.75 and m.use_count == 3 and m.embedding_model == "e5"
    assert (m.source.type, m.source.id) == ("turn", "42")


def test_memory_out_leaves_absent_values_empty():
    m = memory_out(record())
    assert m.domain == "" and m.supersedes == "" and m.entity == ""
    assert not m.HasField("valid_from") and not m.HasField("last_used_time") and not m.HasField("expire_time")


def test_memory_out_writes_timestamps_as_the_same_utc_instant():
    m = memory_out(record())
    assert m.occurred_at.ToDatetime(tzinfo=UTC) == datetime(2024, 5, 1, 8, 0, tzinfo=UTC)
    assert m.create_time.ToDatetime(tzinfo=UTC) == datetime(2024, 5, 1, 8, 0, 1, 500000, tzinfo=UTC)


def test_timestamps_roundtrip_from_memory_out_into_draft_in():
    m = memory_out(record(valid_to=datetime(2030, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)))
    inp = memory_service_pb2.MemoryInput(content="x", occurred_at=m.occurred_at, valid_to=m.valid_to)
    d = draft_in(inp)
    assert d.occurred_at == datetime(2024, 5, 1, 8, 0, tzinfo=UTC)
    assert d.occurred_at.utcoffset() == timedelta(0)
    assert d.valid_to == datetime(2030, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)


def test_memory_out_fills_a_given_target_message():
    target = memory_pb2.Memory()
    assert memory_out(record(content="x"), target) is target
    assert target.content == "x"


# --- every request value is one each layer can hold -------------------------------------------

PROTO_MIN_SECONDS, PROTO_MAX_SECONDS = -62135596800, 253402300799


@pytest.mark.parametrize("seconds, nanos", [
    (PROTO_MIN_SECONDS, 0),  # 0001-01-01T00:00:00Z: stored as -infinity, read back as naive datetime.min
    (PROTO_MAX_SECONDS, 999_999_999),  # 9999-12-31T23:59:59.999999999Z: stored as infinity
    (PROTO_MIN_SECONDS + 86400 - 1, 0), (PROTO_MAX_SECONDS - 86400 + 1, 0),
    (PROTO_MIN_SECONDS - 1, 0), (PROTO_MAX_SECONDS + 1, 0), (2**63 - 1, 0), (0, -1), (0, 10**9),
])
def test_timestamps_outside_the_storable_range_are_invalid_timestamp(seconds, nanos):
    m = memory_service_pb2.MemoryInput(content="x")
    m.occurred_at.seconds, m.occurred_at.nanos = seconds, nanos
    err = _error(draft_in, m)
    assert (err.reason, err.metadata) == ("INVALID_TIMESTAMP", {"field": "occurred_at"})


@pytest.mark.parametrize("moment", [datetime(1, 1, 2, tzinfo=UTC), datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC)])
def test_the_ends_of_the_storable_range_round_trip_through_protobuf(moment):
    m = memory_out(record(occurred_at=moment, valid_to=moment))
    d = draft_in(memory_service_pb2.MemoryInput(content="x", occurred_at=m.occurred_at, valid_to=m.valid_to))
    assert d.occurred_at == moment and d.valid_to == moment


def test_filter_times_are_range_checked_too():
    f = memory_pb2.MemoryFilter(occurred=memory_pb2.TimeRange(start_time=_ts(datetime(1, 1, 1, tzinfo=UTC))))
    assert _error(filter_in, f).reason == "INVALID_TIMESTAMP"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_struct_in_rejects_numbers_jsonb_cannot_store(value):
    m = memory_service_pb2.MemoryInput()
    m.metadata.update({"ok": 1, "bad": {"deeper": [value]}})
    assert _error(struct_in, m, "metadata").reason == "INVALID_METADATA"


def test_struct_in_rejects_deep_and_huge_metadata():
    deep = memory_service_pb2.MemoryInput()
    node = deep.metadata
    for _ in range(30):
        node = node.fields["d"].struct_value
    assert _error(struct_in, deep, "metadata").reason == "INVALID_METADATA"
    huge = memory_service_pb2.MemoryInput()
    huge.metadata.update({"big": "x" * 1_000_000})
    assert _error(struct_in, huge, "metadata").reason == "METADATA_TOO_LARGE"


def test_struct_in_reads_a_value_with_no_kind_as_null():
    m = memory_service_pb2.MemoryInput()
    m.metadata.fields["unset"].SetInParent()
    assert struct_in(m, "metadata") == {"unset": None}


@pytest.mark.parametrize("seconds,nanos", [(10**12, 0), (366 * 86400 + 1, 0), (2**63 - 1, 0), (1, 10**9)])
def test_ttl_beyond_366_days_or_malformed_is_invalid_ttl(seconds, nanos):
    m = memory_service_pb2.MemoryInput(content="x")
    m.ttl.seconds, m.ttl.nanos = seconds, nanos
    assert _error(draft_in, m).reason == "INVALID_TTL"


@pytest.mark.parametrize("field", ["agent_id", "user_id", "session_id", "entity", "attribute"])
def test_filter_in_rejects_nul_in_text_conditions(field):
    assert _error(filter_in, memory_pb2.MemoryFilter(**{field: "a\x00b"})).reason.startswith("INVALID_")


@pytest.mark.parametrize("field", ["tags", "domains"])
def test_filter_in_rejects_nul_in_list_conditions(field):
    assert _error(filter_in, memory_pb2.MemoryFilter(**{field: ["ok", "a\x00b"]})).reason.startswith("INVALID_")
