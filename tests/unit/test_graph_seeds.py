"""The graph channel's seeds: the first pass's best stored memories."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from uuid import uuid4

from memplane_server.core.model import Kind, Layer, MemoryRecord, Scope, Scored, Status
from memplane_server.services.search.graph import seeds_of

NOW = datetime(2024, 1, 1, tzinfo=timezone.utc)
STORED = MemoryRecord(
    id=uuid4(), tenant_id="acme", scope=Scope.GLOBAL, domain=None, agent_id=None, user_id=None, session_id="s1",
    layer=Layer.EPISODIC, kind=Kind.TURN, content="met Ana in Lyon", context="", entity=None, attribute=None,
    value=None, tags=[], metadata={}, confidence=1.0, status=Status.ACTIVE, supersedes=None, source_type=None,
    source_id=None, occurred_at=NOW, valid_from=None, valid_to=None, created_at=NOW, updated_at=NOW,
)


def test_working_items_are_no_seeds_and_take_no_place():
    working = replace(STORED, id=str(uuid4()), layer=Layer.WORKING)
    second = replace(STORED, id=uuid4())
    seeds = seeds_of({"working": [Scored(working, 0.9)], "vector": [Scored(STORED, 0.8), Scored(second, 0.7)]},
                     {"working": 2.0, "vector": 1.0})
    assert seeds == [STORED.id, second.id]
