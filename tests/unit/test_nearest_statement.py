"""nearest_statement: channels searching one session share one scan of its rows; channels with any
other filter keep a statement each, so each keeps its own plan and only its nearest rows."""
from __future__ import annotations

import numpy as np

from memplane_server.core.caller import Caller, Role
from memplane_server.core.model import MemoryFilter
from memplane_server.stores.postgres.nearest import VectorQuery, nearest_statement

CALLER = Caller(key_id="k", role=Role.WRITER, tenant_id="t", agent_id=None, domains={})
VECTOR = np.zeros(3, dtype=np.float32)


def pair(f: MemoryFilter) -> list[VectorQuery]:
    return [VectorQuery(f, VECTOR, 50), VectorQuery(f, VECTOR, 50, windows=True)]


def test_the_channels_of_one_session_share_one_materialised_scan():
    sql, _ = nearest_statement(CALLER, pair(MemoryFilter(session_id="s")))
    assert sql.startswith("WITH shared0 AS MATERIALIZED") and sql.count("FROM memories m") == 1


def test_channels_of_one_user_keep_a_statement_each():
    sql, _ = nearest_statement(CALLER, pair(MemoryFilter(user_id="u")))
    assert "MATERIALIZED" not in sql and sql.count("FROM memories m") == 2
