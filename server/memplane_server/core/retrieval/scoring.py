"""From channel results to ranked hits: weighted reciprocal rank fusion, then one factor per
adjustment (scope, kind intent, recency, confidence, valid time, consolidation, lifecycle weight),
each listed in the explanation."""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from ..model import MemoryRecord, Scope, ScoreComponent, Scored, SearchHit
from .adjust import confidence_weight, consolidated_weight, kind_bonus, lifecycle_weight, recency, valid_time_weight
from .fusion import RRF_K, reciprocal_rank_fusion
from .intent import Intent
from .time_expressions import TimeRange


@dataclass(frozen=True)
class Adjustments:
    """What the factors after fusion depend on."""

    intent: Intent
    time_range: TimeRange | None
    now: datetime
    recency_lambdas: dict[str, float]
    scope_weights: dict[Scope, float]
    scope_order: tuple[Scope, ...]  # ties go to the earlier scope
    explain: bool


# Keyword channels score by BM25 over the tenant's term statistics, which count every agent's
# private memories: the raw score would let an agent work out how many memories it cannot read
# use a word. Their explanation shows the rank's share of fusion instead.
STATISTICS_CHANNEL_PREFIX = "keyword"
FACTORS = ("scope_weight", "kind_intent", "recency", "confidence", "valid_time", "consolidated", "lifecycle")


def channel_component(channel: str, score: float, rank: int, weight: float) -> ScoreComponent:
    if channel.startswith(STATISTICS_CHANNEL_PREFIX):
        return ScoreComponent(channel, weight / (RRF_K + rank), rank,
                              f"{channel} channel, weight {weight:g}; value: weight / (k + rank), its share of fusion")
    return ScoreComponent(channel, score, rank, f"{channel} channel, weight {weight:g}")


def fuse_and_adjust(results: dict[str, list[Scored]], weights: dict[str, float], a: Adjustments) -> list[SearchHit]:
    records: dict[str, MemoryRecord] = {}
    signals: dict[str, dict[str, float]] = {}
    for channel, scored in results.items():
        for s in scored:
            key = str(s.record.id)
            records.setdefault(key, s.record)
            signals.setdefault(key, {})[channel] = s.score
    fused = reciprocal_rank_fusion({ch: [str(s.record.id) for s in sc] for ch, sc in results.items()}, weights)
    lambdas, span = a.recency_lambdas, a.time_range
    hits = []
    for key, (rrf, ranks) in fused.items():
        record = records[key]
        values = (
            a.scope_weights.get(record.scope, 1.0), kind_bonus(a.intent, record.kind), recency(record, a.now, lambdas),
            confidence_weight(record), valid_time_weight(record, span), consolidated_weight(record),
            lifecycle_weight(record),
        )
        score = rrf * math.prod(values)
        explanation = []
        if a.explain:
            # Worded only when asked for: a search fuses a few hundred candidates to serve ten.
            details = (
                f"scope {record.scope.value}", f"query intent {a.intent.value}, kind {record.kind.value}",
                f"exp(-{lambdas.get(record.kind.value, 0.0)} * age_days)",
                f"0.5 + 0.5 * confidence {record.confidence:.2f}",
                f"query asks about {span.matched!r}" if span else "query names no time",
                f"consolidated into {record.consolidated_into}" if record.consolidated_into else "not consolidated",
                "kept at a lower weight: rarely used (lifecycle policy)" if record.lifecycle_weight < 1 else "full weight",
            )
            explanation = [channel_component(ch, signals[key][ch], ranks[ch], weights.get(ch, 1.0))
                           for ch in results if ch in ranks]
            explanation.append(ScoreComponent("rrf", rrf, 0, f"weighted reciprocal rank fusion, k={RRF_K}"))
            explanation.extend(ScoreComponent(name, value, 0, detail)
                               for name, value, detail in zip(FACTORS, values, details))
        hits.append(SearchHit(record, score, explanation))
    rank_of_scope = {scope: i for i, scope in enumerate(a.scope_order)}
    hits.sort(key=lambda h: (-h.score, rank_of_scope.get(h.memory.scope, len(a.scope_order))))
    return [h for h in hits if h.score > 0]
