"""nearest_statement: channels with the same filter share one scan of its rows (ids and distances,
then each channel's nearest rows read back by id) in a tenant sorted exactly; in a walked tenant
only a session's channels do, and the others keep a statement each, so each keeps its own plan."""
from __future__ import annotations

import numpy as np

from memplane_server.core.caller import Caller, Role
from memplane_server.core.model import MemoryFilter
from memplane_server.stores.postgres.nearest import VectorQuery, nearest_statement

CALLER = Caller(key_id="k", role=Role.WRITER, tenant_id="t", agent_id="a", domains={})
VECTOR = np.zeros(3, dtype=np.float32)


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
