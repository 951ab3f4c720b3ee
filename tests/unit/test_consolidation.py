"""Lessons and procedures cluster when close AND sharing an entity or their words, within one
owner and kind."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from uuid import uuid4

import numpy as np

from memplane_server.core.model import Kind, Layer, MemoryRecord, Scope, Status
from memplane_server.core.reflection.consolidation import clusters


def lesson(**kw) -> MemoryRecord:
    now = datetime.now(timezone.utc)
    return MemoryRecord(**{**dict(
        id=uuid4(), tenant_id="t", scope=Scope.GLOBAL, domain=None, agent_id=None, user_id=None, session_id=None,
        layer=Layer.PROCEDURAL, kind=Kind.LESSON, content="x", context="", entity=None, attribute=None, value=None,
        tags=[], metadata={}, confidence=0.9, status=Status.ACTIVE, supersedes=None, source_type=None, source_id=None,
        occurred_at=now, valid_from=None, valid_to=None, created_at=now, updated_at=now), **kw})


def unit(*angles: float) -> np.ndarray:
    return np.array([[np.cos(a), np.sin(a)] for a in angles], dtype=np.float32)


CLOSE_PAIR = unit(0.0, 0.3)  # cosine 0.955
FAR_PAIR = unit(0.0, 1.0)  # cosine 0.54


def test_close_memories_sharing_their_words_cluster():
    words = [{"drain", "queue", "rotat", "key"}, {"empti", "queue", "rotat", "key"}]
    assert clusters([lesson(), lesson()], CLOSE_PAIR, words) == [[0, 1]]


def test_closeness_without_shared_words_or_entity_is_not_enough():
    words = [{"drain", "queue", "rotat", "key"}, {"run", "migrat", "deploy", "api"}]
    assert clusters([lesson(), lesson()], CLOSE_PAIR, words) == []


def test_a_shared_entity_is_enough_with_closeness():
    records = [lesson(entity="billing"), lesson(entity="billing")]
    assert clusters(records, CLOSE_PAIR, [{"a"}, {"b"}]) == [[0, 1]]


def test_shared_words_far_apart_do_not_cluster():
    assert clusters([lesson(), lesson()], FAR_PAIR, [{"queue"}, {"queue"}]) == []


def test_different_kinds_or_owners_never_cluster():
    words = [{"queue", "key"}, {"queue", "key"}]
    assert clusters([lesson(), lesson(kind=Kind.PROCEDURE)], CLOSE_PAIR, words) == []
    assert clusters([lesson(), lesson(scope=Scope.PRIVATE, agent_id="a1")], CLOSE_PAIR, words) == []


def test_similarity_chains_into_one_cluster():
    words = [{"queue", "key", "a"}, {"queue", "key", "b"}, {"queue", "key", "c"}]
    assert clusters([lesson(), lesson(), replace(lesson())], unit(0.0, 0.2, 0.4), words) == [[0, 1, 2]]
