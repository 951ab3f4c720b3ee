"""nearest_statement: channels with the same filter (or it narrowed by kind or time) share one scan
of its rows (ids and distances, then each channel's nearest rows read back by id) in a tenant sorted
exactly; in a walked tenant only a session's channels do, and the others keep a statement each, so
each keeps its own plan. One generic plan serves a session's queries sharing one scan."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import numpy as np

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import Kind, MemoryFilter
from memplane_server.stores.postgres.search.nearest import VectorQuery, generic_plan_serves, nearest_statement

CALLER = Caller(key_id="k", role=Role.WRITER, tenant_id="t", agent_id="a", domains={})
VECTOR = np.zeros(3, dtype=np.float32)
MARCH = (datetime(2023, 3, 1, tzinfo=timezone.utc), datetime(2023, 4, 1, tzinfo=timezone.utc))


def pair(f: MemoryFilter) -> list[VectorQuery]:
    return [VectorQuery(f, VECTOR, 50), VectorQuery(f, VECTOR, 50, windows=True)]


def test_the_channels_of_one_session_share_one_materialised_scan_in_a_walked_tenant():
    sql, _ = nearest_statement(CALLER, pair(MemoryFilter(session_id="s")), walk=True)
    assert sql.startswith("WITH shared0 AS MATERIALIZED") and sql.count("FROM shared0") == 2


def test_channels_of_one_user_keep_a_statement_each_in_a_walked_tenant():
    sql, _ = nearest_statement(CALLER, pair(MemoryFilter(user_id="u")), walk=True)
    assert "MATERIALIZED" not in sql and sql.count("FROM memories m") == 2


def test_broad_channels_of_a_tenant_sorted_exactly_share_one_scan():
    sql, _ = nearest_statement(CALLER, pair(MemoryFilter()))
    assert sql.startswith("WITH shared0 AS MATERIALIZED") and sql.count("FROM shared0") == 2


def test_the_shared_scan_holds_ids_and_distances_only():
    sql, _ = nearest_statement(CALLER, pair(MemoryFilter()))
    scan = sql[:sql.index(") (SELECT")]
    assert scan.startswith("WITH shared0 AS MATERIALIZED (SELECT m.id, m.embedding <=> $") and "m.content" not in scan


def test_each_channels_rows_are_read_back_under_the_callers_visibility():
    sql, _ = nearest_statement(CALLER, pair(MemoryFilter()))
    readback = sql.split("JOIN memories m ON m.id = s.id WHERE ")[1:]
    assert len(readback) == 2
    assert all(r.startswith("((m.scope = 'global' AND m.tenant_id = $") and "m.agent_id = $" in r for r in readback)


def test_channels_with_different_filters_keep_a_statement_each():
    queries = [VectorQuery(MemoryFilter(), VECTOR, 50), VectorQuery(MemoryFilter(user_id="u"), VECTOR, 50)]
    sql, _ = nearest_statement(CALLER, queries)
    assert "MATERIALIZED" not in sql and sql.count("FROM memories m") == 2


def scan_columns(sql: str) -> str:
    return sql.split("MATERIALIZED (SELECT ", 1)[1].split(" FROM ", 1)[0]


def test_the_same_kind_filter_shares_a_scan_that_reads_no_kind():
    f = MemoryFilter(kinds=(Kind.TURN,), session_id="s")
    sql, _ = nearest_statement(CALLER, [VectorQuery(f, VECTOR, 5), VectorQuery(f, VECTOR, 5, windows=True)])
    assert sql.count("MATERIALIZED") == 1 and "m.kind" not in scan_columns(sql) and "shared0.kind" not in sql


def test_preferences_and_a_named_span_narrow_the_sessions_scan():
    f = MemoryFilter(session_id="s")
    queries = [VectorQuery(f, VECTOR, 5), VectorQuery(replace(f, kinds=(Kind.PREFERENCE,)), VECTOR, 3),
               VectorQuery(replace(f, occurred_after=MARCH[0], occurred_before=MARCH[1]), VECTOR, 5)]
    sql, _ = nearest_statement(CALLER, queries)
    assert sql.count("MATERIALIZED") == 1 and sql.count("FROM shared0") == 3
    assert {"m.kind", "m.occurred_at"} <= {c.strip() for c in scan_columns(sql).split(",")}
    assert sql.count("shared0.kind = ANY") == 1 and sql.count("shared0.occurred_at") == 2
    assert generic_plan_serves(queries)


def test_a_kind_outside_the_filters_kinds_is_a_statement_of_its_own():
    f = MemoryFilter(kinds=(Kind.TURN,), session_id="s")
    queries = [VectorQuery(f, VECTOR, 5), VectorQuery(f, VECTOR, 5, windows=True),
               VectorQuery(replace(f, kinds=(Kind.PREFERENCE,)), VECTOR, 3)]
    sql, _ = nearest_statement(CALLER, queries)
    assert sql.count("FROM shared0") == 2 and "shared0.kind" not in sql
    assert not generic_plan_serves(queries)


def test_a_span_wider_than_the_filters_is_a_statement_of_its_own():
    f = MemoryFilter(session_id="s", occurred_after=MARCH[0], occurred_before=MARCH[1])
    wider = replace(f, occurred_after=datetime(2023, 1, 1, tzinfo=timezone.utc))
    sql, _ = nearest_statement(CALLER, [VectorQuery(f, VECTOR, 5), VectorQuery(wider, VECTOR, 5)])
    assert "MATERIALIZED" not in sql and sql.count("UNION ALL") == 1


def test_only_a_sessions_queries_in_one_scan_are_planned_generically():
    session, broad = MemoryFilter(session_id="s"), MemoryFilter()
    assert generic_plan_serves([VectorQuery(session, VECTOR, 5), VectorQuery(session, VECTOR, 5, windows=True)])
    assert not generic_plan_serves([VectorQuery(session, VECTOR, 5)])  # alone it may walk the graph
    assert not generic_plan_serves([VectorQuery(broad, VECTOR, 5), VectorQuery(broad, VECTOR, 5, windows=True)])
