"""The blocked numpy grouping (core/grouping.py) finds exactly the groups the pairwise Python loop
it replaced found, for consolidation's clusters and reflection's near-duplicates, on random data
with many links, across block boundaries."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from uuid import uuid4

import numpy as np
import pytest

from memplane_server.core import grouping
from memplane_server.core.model import Kind, Layer, MemoryRecord, Scope, Status
from memplane_server.core.reflection import consolidation
from memplane_server.core.reflection.reflection import near_duplicate_groups


def pairwise_clusters(records: list[MemoryRecord], vectors: np.ndarray, words: list[set[str]]) -> list[list[int]]:
    """The reference: consolidation's clusters as first computed, every pair in Python."""
    parent = list(range(len(records)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    cosines = vectors @ vectors.T if len(records) else np.empty((0, 0))
    for i in range(len(records)):
        for j in range(i + 1, len(records)):
            if consolidation._owner(records[i]) != consolidation._owner(records[j]) or cosines[i, j] < consolidation.CLOSE:
                continue
            shared_entity = records[i].entity is not None and records[i].entity == records[j].entity
            a, b = words[i], words[j]
            if shared_entity or (bool(a and b) and len(a & b) / len(a | b) >= consolidation.SHARED_WORDS):
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(len(records)):
        groups.setdefault(root(i), []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def pairwise_near_duplicates(vectors: np.ndarray, keys: list[tuple], threshold: float) -> list[list[int]]:
    """The reference: reflection's near-duplicate groups as first computed, every pair in Python."""
    if len(vectors) == 0:
        return []
    sims = vectors @ vectors.T
    parent = list(range(len(vectors)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(vectors)):
        for j in range(i + 1, len(vectors)):
            if keys[i] == keys[j] and sims[i, j] >= threshold:
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(len(vectors)):
        groups.setdefault(root(i), []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def near(rng: np.random.Generator, n: int, dim: int, centres: int, noise: float) -> np.ndarray:
    """Unit vectors around a few centres: cosines spread across the thresholds, so many pairs link."""
    c = rng.normal(size=(centres, dim))
    v = c[rng.integers(centres, size=n)] + rng.normal(scale=noise, size=(n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


BASE = MemoryRecord(
    id=uuid4(), tenant_id="t", scope=Scope.GLOBAL, domain=None, agent_id=None, user_id=None, session_id=None,
    layer=Layer.PROCEDURAL, kind=Kind.LESSON, content="x", context="", entity=None, attribute=None, value=None,
    tags=[], metadata={}, confidence=0.9, status=Status.ACTIVE, supersedes=None, source_type=None, source_id=None,
    occurred_at=datetime.now(timezone.utc), valid_from=None, valid_to=None, created_at=None, updated_at=None)


def random_lessons(rng: np.random.Generator, n: int) -> tuple[list[MemoryRecord], np.ndarray, list[set[str]]]:
    owners = [(Scope.GLOBAL, None, None), (Scope.PRIVATE, None, "a1"), (Scope.PRIVATE, None, "a2"),
              (Scope.DOMAIN, "ops", None)]
    records = []
    for _ in range(n):
        scope, domain, agent = owners[rng.integers(len(owners))]
        records.append(replace(BASE, id=uuid4(), scope=scope, domain=domain, agent_id=agent,
                               kind=(Kind.LESSON, Kind.PROCEDURE)[rng.integers(2)],
                               entity=(None, None, "", "billing", "deploy")[rng.integers(5)]))
    vocabulary = [f"w{k}" for k in range(30)]
    words = [set(rng.choice(vocabulary, size=rng.integers(0, 8), replace=False)) for _ in range(n)]
    return records, near(rng, n, 16, 6, 0.25), words


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("cells", [grouping.BLOCK_CELLS, 64])
def test_clusters_match_the_pairwise_loop(seed, cells, monkeypatch):
    monkeypatch.setattr(grouping, "BLOCK_CELLS", cells)  # 64: blocks of a row or two, every boundary crossed
    rng = np.random.default_rng(seed)
    records, vectors, words = random_lessons(rng, 300)
    expected = pairwise_clusters(records, vectors, words)
    assert sum(map(len, expected)) > 100  # the data links plenty, chains included
    assert consolidation.clusters(records, vectors, words) == expected


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("cells", [grouping.BLOCK_CELLS, 64])
def test_near_duplicate_groups_match_the_pairwise_loop(seed, cells, monkeypatch):
    monkeypatch.setattr(grouping, "BLOCK_CELLS", cells)
    rng = np.random.default_rng(100 + seed)
    vectors = near(rng, 400, 16, 8, 0.2)
    keys = [("private", None, "bot", ("fact", "event")[rng.integers(2)]) for _ in range(400)]
    expected = pairwise_near_duplicates(vectors, keys, 0.9)
    assert sum(map(len, expected)) > 100
    assert near_duplicate_groups(vectors, keys, 0.9) == expected


def test_no_records_have_no_clusters():
    assert consolidation.clusters([], np.zeros((0, 4), dtype=np.float32), []) == []
