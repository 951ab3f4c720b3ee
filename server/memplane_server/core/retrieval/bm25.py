"""BM25 over the keyword channel's candidates, with term statistics taken from the candidates
themselves: a word every candidate shares (a speaker's name in every turn of a conversation)
then counts for little, and the rare word the question is really about for much."""
from __future__ import annotations

import math
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

K1 = 1.2
B = 0.75


def bm25_scores(
    query: list[str], documents: list[list[str]] | list[Mapping[str, int]], weights: Mapping[str, float] | None = None,
    lengths: list[int] | None = None,
) -> list[float]:
    """Scores of documents given as token lists or as token -> count maps; a term's weight
    (default 1) multiplies its part of the score. With lengths (each document's count of tokens),
    a map need only hold the query's terms."""
    terms = set(query)
    if not documents or not terms:
        return [0.0] * len(documents)
    n = len(documents)
    counts = [doc if isinstance(doc, Mapping) else Counter(doc) for doc in documents]
    if lengths is None:
        lengths = [sum(c.values()) for c in counts]
    df = {t: sum(1 for c in counts if t in c) for t in terms}
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * (weights or {}).get(t, 1.0) for t in terms}
    average = sum(lengths) / n or 1.0
    scores = []
    for length, c in zip(lengths, counts):
        norm = K1 * (1 - B + B * length / average)
        scores.append(sum(idf[t] * c[t] * (K1 + 1) / (c[t] + norm) for t in terms if t in c))
    return scores


@dataclass(frozen=True)
class KeywordMatch:
    """A row a keyword channel matched, before its record is read: its rank in SQL and its
    indexed tokens with how often each occurs (or, with length, only the query's tokens and the
    count of all its tokens)."""

    id: uuid.UUID
    score: float
    terms: Mapping[str, int]
    length: int | None = None


def best_matches(
    query_tokens: list[str], matches: list[KeywordMatch], limit: int, weights: Mapping[str, float] | None = None,
) -> list[KeywordMatch]:
    """The matches ordered by BM25 over their own term statistics, at most limit of them; those
    that share no query term drop out."""
    lengths = None
    if matches and all(m.length is not None for m in matches):
        lengths = [m.length or 0 for m in matches]
    scores = bm25_scores(query_tokens, [m.terms for m in matches], weights, lengths)
    ranked = sorted(zip(scores, range(len(matches))), key=lambda pair: (-pair[0], pair[1]))
    return [KeywordMatch(matches[i].id, score, matches[i].terms, matches[i].length)
            for score, i in ranked[:limit] if score > 0]
