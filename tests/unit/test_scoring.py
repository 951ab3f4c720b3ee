"""Fusion and adjustment of channel results into ranked, explained hits."""
from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timezone

from memplane_server.core.model import DEFAULT_SCOPE_ORDER, Kind, Scope, Scored
from memplane_server.core.retrieval.intent import Intent
from memplane_server.core.retrieval.scoring import Adjustments, fuse_and_adjust
from tests.unit.test_intent_and_adjust import record as same_id_record

NOW = datetime(2025, 1, 1, tzinfo=timezone.utc)


def record(kind: Kind, occurred: datetime):
    return replace(same_id_record(kind, occurred), id=str(uuid.uuid4()))


def adjustments(**kw) -> Adjustments:
    base = dict(intent=Intent.NONE, time_range=None, now=NOW, recency_lambdas={}, scope_weights={},
                scope_order=DEFAULT_SCOPE_ORDER, explain=True)
    return Adjustments(**{**base, **kw})


def test_a_memory_found_by_two_channels_beats_one_found_by_one():
    a, b = record(Kind.FACT, NOW), record(Kind.FACT, NOW)
    hits = fuse_and_adjust({"vector": [Scored(b, 0.9), Scored(a, 0.8)], "keyword": [Scored(a, 3.0)]},
                           {"vector": 1.0, "keyword": 1.0}, adjustments())
    assert [h.memory.id for h in hits] == [a.id, b.id]


def test_every_factor_is_explained():
    a = record(Kind.FACT, NOW)
    [hit] = fuse_and_adjust({"vector": [Scored(a, 0.9)]}, {"vector": 1.0}, adjustments())
    names = [c.name for c in hit.explanation]
    assert names == ["vector", "rrf", "scope_weight", "kind_intent", "recency", "confidence", "valid_time", "consolidated",
                     "lifecycle"]


def test_ties_go_to_the_earlier_scope():
    g = replace(record(Kind.FACT, NOW), scope=Scope.GLOBAL)
    p = replace(record(Kind.FACT, NOW), scope=Scope.PRIVATE)
    results = {"a": [Scored(p, 1.0)], "b": [Scored(g, 1.0)]}
    order = fuse_and_adjust(results, {"a": 1.0, "b": 1.0}, adjustments(scope_order=(Scope.PRIVATE, Scope.GLOBAL)))
    assert [h.memory.scope for h in order] == [Scope.PRIVATE, Scope.GLOBAL]


def test_a_zero_scope_weight_drops_the_hit():
    g = replace(record(Kind.FACT, NOW), scope=Scope.GLOBAL)
    assert fuse_and_adjust({"v": [Scored(g, 1.0)]}, {"v": 1.0}, adjustments(scope_weights={Scope.GLOBAL: 0.0})) == []


def test_a_keyword_channel_is_explained_by_its_rank_not_its_tenant_wide_score():
    a = record(Kind.FACT, NOW)
    explained = [
        {c.name: c for c in fuse_and_adjust({"keyword_context": [Scored(a, bm25)], "vector": [Scored(a, 0.9)]},
                                            {"keyword_context": 1.0, "vector": 1.0}, adjustments())[0].explanation}
        for bm25 in (2.7, 9.4)
    ]
    assert explained[0]["keyword_context"] == explained[1]["keyword_context"]
    assert explained[0]["keyword_context"].rank == 1 and explained[0]["vector"].value == 0.9
