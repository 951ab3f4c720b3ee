"""Pseudo-relevance feedback: the first pass's best hits stand in for what the query meant, and a
second pass looks again with what they hold (no LLM). The dense query moves toward their vectors
(Rocchio); the keyword query gains their terms, the rarer in the tenant the more."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np


def rocchio(query: np.ndarray, feedback: Sequence[np.ndarray], beta: float) -> np.ndarray:
    """q + beta * centroid(feedback), at unit length: vectors are compared by cosine, and the
    centroid of unit vectors is shorter than they are, so beta weighs it against q as given."""
    if not feedback or beta <= 0:
        return query
    centroid = np.mean(np.stack([np.asarray(v, dtype=np.float32) for v in feedback]), axis=0)
    moved = np.asarray(query, dtype=np.float32) + beta * centroid
    norm = float(np.linalg.norm(moved))
    return (moved / norm).astype(np.float32) if norm > 0 else query


def rarity(share: float) -> float:
    """Inverse document frequency from the share of the tenant's rows holding a term."""
    return math.log(1 / share)


def expansion_terms(
    query_terms: Sequence[str], feedback: Sequence[Mapping[str, int]], shares: Mapping[str, float], *,
    count: int, max_share: float, unlisted_share: float,
) -> dict[str, float]:
    """At most `count` terms of the feedback documents that the query lacks, each weighted by how
    much of the documents it makes up (its count over the document's length, summed over them:
    a term several of them share counts more) times its rarity in the tenant. `shares` lists the
    tenant's common terms (stores/postgres/search/keyword_stats.py); an unlisted term is rarer than any
    listed one and counts as `unlisted_share`. Terms above max_share are left out: the keyword
    channels would not match on them. Weights are scaled so the best is 1."""
    if count <= 0 or not feedback:
        return {}
    asked = set(query_terms)
    scores: dict[str, float] = {}
    for doc in feedback:
        length = sum(doc.values())
        for term, n in doc.items():
            share = shares.get(term, unlisted_share)
            if term in asked or share > max_share or not length:
                continue
            scores[term] = scores.get(term, 0.0) + n / length * rarity(share)
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:count]
    top = best[0][1] if best else 0.0
    return {term: score / top for term, score in best if score > 0}
