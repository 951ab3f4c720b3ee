"""Which lessons and procedures of one scope say the same kind of thing (issue 13's consolidation).

Two memories are similar when their vectors are close AND they share an entity or enough of their
words. Closeness alone does not separate with the local embedder: passage cosines are compressed
("Drain the queue before rotating keys" against "Run the migrations before deploying" scores
0.925, above the true pair "...empty the queue first when you rotate keys" at 0.914), while the
true pairs share their content words (Jaccard of keyword stems 0.2-0.35 against 0.1 for the
unrelated). Clusters are the connected groups of similar pairs within one owner and kind.
"""
from __future__ import annotations

import numpy as np

from .model import MemoryRecord

CLOSE = 0.88
SHARED_WORDS = 0.2


def _owner(r: MemoryRecord) -> tuple:
    return (r.scope, r.domain, r.agent_id if r.scope.value == "private" else None, r.kind)


def _similar_words(a: set[str], b: set[str]) -> bool:
    return bool(a and b) and len(a & b) / len(a | b) >= SHARED_WORDS


def clusters(records: list[MemoryRecord], vectors: np.ndarray, words: list[set[str]]) -> list[list[int]]:
    """Groups (indices, oldest first) of two or more similar memories."""
    parent = list(range(len(records)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    cosines = vectors @ vectors.T if len(records) else np.empty((0, 0))
    for i in range(len(records)):
        for j in range(i + 1, len(records)):
            if _owner(records[i]) != _owner(records[j]) or cosines[i, j] < CLOSE:
                continue
            shared_entity = records[i].entity is not None and records[i].entity == records[j].entity
            if shared_entity or _similar_words(words[i], words[j]):
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(len(records)):
        groups.setdefault(root(i), []).append(i)
    return [g for g in groups.values() if len(g) > 1]
