"""Reading never fails on a stored row: the conversions out (api/convert.py, the history snapshot
and row mapping of stores/postgres/sql.py, working items of stores/redis/working.py) are total. A
time protobuf cannot hold is clamped, a row that cannot be represented is logged once and left
out. Rows like these were stored before every value was range-checked."""
from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from uuid import uuid4

import pytest

from memplane.v1 import memory_pb2, memory_service_pb2
from memplane_server.api.convert import add_each, history_out, memory_out, ts_out
from memplane_server.core.model import HistoryEntry, Kind, Layer, MemoryRecord, Scope, Status
from memplane_server.core.validation import EARLIEST_TIME, LATEST_TIME
from memplane_server.core.working import item_to_record
from memplane_server.stores.postgres.sql import record_from_json, record_from_row, record_to_json
from memplane_server.stores.redis.working import item_from_json, items_from_json

UTC = timezone.utc
PROTO_MIN_SECONDS, PROTO_MAX_SECONDS = -62135596800, 253402300799


def record(**overrides) -> MemoryRecord:
    values = dict(
        id=uuid4(), tenant_id="acme", scope=Scope.GLOBAL, domain=None, agent_id=None, user_id=None,
        session_id=None, layer=Layer.EPISODIC, kind=Kind.EVENT, content="it happened", context="", entity=None,
        attribute=None, value=None, tags=[], metadata={}, confidence=1.0, status=Status.ACTIVE, supersedes=None,
        source_type=None, source_id=None, occurred_at=datetime(2024, 5, 1, tzinfo=UTC), valid_from=None,
        valid_to=None, created_at=datetime(2024, 5, 1, tzinfo=UTC), updated_at=datetime(2024, 5, 1, tzinfo=UTC),
    )
    values.update(overrides)
    return MemoryRecord(**values)


# --- ts_out -----------------------------------------------------------------------------------

def _out(value):
    m = memory_pb2.Memory()
    ts_out(m.occurred_at, value)
    return m.occurred_at


def test_postgres_infinities_read_by_asyncpg_as_naive_min_and_max_are_the_ends_of_protobuf():
    # This was "ValueError: year 0 is out of range" in every List and Search that saw the row.
    assert (_out(datetime.min).seconds, _out(datetime.min).nanos) == (PROTO_MIN_SECONDS, 0)
    assert (_out(datetime.max).seconds, _out(datetime.max).nanos) == (PROTO_MAX_SECONDS, 999_999_000)


def test_a_time_whose_offset_leaves_the_calendar_is_clamped():
    early = datetime(1, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=1)))
    late = datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-2)))
    assert _out(early).seconds == PROTO_MIN_SECONDS
    assert _out(late).seconds == PROTO_MAX_SECONDS


def test_ordinary_times_are_written_as_the_same_utc_instant():
    moment = datetime(2024, 5, 1, 16, tzinfo=timezone(timedelta(hours=8)))
    assert _out(moment).ToDatetime(tzinfo=UTC) == datetime(2024, 5, 1, 8, tzinfo=UTC)
    assert not memory_pb2.Memory().HasField("occurred_at") and _out(None).seconds == 0


def test_memory_out_of_a_row_holding_infinities_succeeds():
    m = memory_out(record(occurred_at=datetime.min, valid_from=datetime.min, valid_to=datetime.max))
    assert m.occurred_at.seconds == PROTO_MIN_SECONDS and m.valid_to.seconds == PROTO_MAX_SECONDS


# --- record_from_row / record_from_json ----------------------------------------------------------

def _row(**overrides) -> dict:
    r = record()
    row = {**record_to_json(r), "id": r.id, "supersedes": None, "last_used_at": None, "use_count": 0}
    row.update({k: getattr(r, k) for k in ("occurred_at", "valid_from", "valid_to", "created_at", "updated_at")})
    row.update(overrides)
    return row


def test_rows_holding_postgres_infinities_come_back_as_aware_utc_times():
    r = record_from_row(_row(occurred_at=datetime.min, valid_to=datetime.max))
    assert r.occurred_at == datetime.min.replace(tzinfo=UTC) and r.valid_to == datetime.max.replace(tzinfo=UTC)
    # so domain code may compare them with aware times (recency, valid-time weight)
    assert r.occurred_at < datetime(2024, 1, 1, tzinfo=UTC) < r.valid_to


def test_a_snapshot_of_a_row_with_infinities_reads_back():
    r = record_from_row(_row(occurred_at=datetime.min))
    snapshot = record_to_json(r)
    assert record_from_json(snapshot).occurred_at == datetime.min.replace(tzinfo=UTC)
    assert record_from_json({**snapshot, "occurred_at": "0001-01-01T00:00:00"}).occurred_at.tzinfo is UTC


@pytest.mark.parametrize("broken", [
    {"scope": "galaxy"}, {"occurred_at": "not a time"}, {"tags": None}, {"kind": None},
])
def test_a_snapshot_that_does_not_read_as_a_memory_is_none_and_logged_once(broken, caplog):
    snapshot = {**record_to_json(record()), **broken}
    with caplog.at_level(logging.WARNING):
        assert record_from_json(snapshot) is None
        assert record_from_json(snapshot) is None
        assert record_from_json({"id": snapshot["id"]}) is None  # a snapshot of an older shape
    assert len([r for r in caplog.records if snapshot["id"] in r.getMessage()]) == 1


def test_history_entry_without_a_snapshot_is_sent_with_an_empty_one():
    target = memory_service_pb2.HistoryEntry()
    history_out(HistoryEntry(uuid4(), "erased", None, datetime(2024, 5, 1, tzinfo=UTC), "k1", ""), target)
    assert target.action == memory_service_pb2.HISTORY_ACTION_ERASED and not target.HasField("snapshot")


# --- add_each: one row that cannot be represented never fails the answer -----------------------------

def test_metadata_protobuf_cannot_hold_is_left_out_of_the_memory_and_logged_once(caplog):
    r = record(metadata={"n": 10**400})  # a jsonb number no double holds
    with caplog.at_level(logging.ERROR):
        first, again = memory_out(r), memory_out(r)
    assert first.content == "it happened" and not first.HasField("metadata") and not again.HasField("metadata")
    assert len([x for x in caplog.records if str(r.id) in x.getMessage()]) == 1


def test_a_row_that_cannot_be_represented_is_left_out_and_logged_once(caplog):
    good, bad = record(content="good"), record(content="bad \ud800")  # a lone surrogate: not UTF-8
    response = memory_service_pb2.ListMemoriesResponse()
    with caplog.at_level(logging.ERROR):
        add_each(response.memories, [good, bad, good], memory_out)
        add_each(response.memories, [bad], memory_out)
    assert [m.content for m in response.memories] == ["good", "good"]
    assert len([r for r in caplog.records if str(bad.id) in r.getMessage()]) == 1


# --- working items ------------------------------------------------------------------------------

def _item(**overrides) -> dict:
    item = {"id": str(uuid4()), "tenant_id": "acme", "agent_id": None, "session_id": "s1", "user_id": None,
            "kind": "turn", "content": "hi", "context": "", "state_key": None, "tags": [], "metadata": {},
            "confidence": 1.0, "source_type": None, "source_id": None, "occurred_at": 0.0,
            "created_at": 1_700_000_000.0, "expire_at": 1_700_086_400.0}
    item.update(overrides)
    return item


@pytest.mark.parametrize("expire_at", [1_700_000_000.0 + 10**12, 1e300, float("inf"), float("nan")])
def test_working_items_that_expire_past_year_9999_read_with_a_clamped_expiry(expire_at):
    # A ttl of 1e12 s was accepted before; GetWorkingMemory then failed for the whole session.
    r = item_to_record(item_from_json(_item(expire_at=expire_at)))
    assert r.expire_at in (LATEST_TIME, EARLIEST_TIME)
    assert memory_out(r).HasField("expire_time")


def test_working_item_times_read_back_inside_the_storable_range():
    # 9999-12-30T23:59:59.999999 as a float reads back as 9999-12-31, which promotion would refuse.
    r = item_to_record(item_from_json(_item(occurred_at=LATEST_TIME.timestamp())))
    assert r.occurred_at == LATEST_TIME
    assert item_from_json(_item(occurred_at=0.0)).occurred_at == datetime(1970, 1, 1, tzinfo=UTC)


def test_a_working_item_that_does_not_read_as_one_is_left_out_of_its_session():
    unknown_kind, fine = _item(kind="no-such-kind"), _item()
    assert [i.id for i in items_from_json([unknown_kind, fine])] == [fine["id"]]
