"""Search: vector and keyword channels (and the session's working memory) run concurrently,
fused by reciprocal rank fusion, weighted by scope, cut to top_k and a token budget."""
from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

import numpy as np

from ..core.caller import Caller
from ..core.errors import invalid
from ..core.fusion import reciprocal_rank_fusion
from ..core.adjust import confidence_weight, kind_bonus, recency
from ..core.bm25 import bm25_scores
from ..core.intent import detect_intent
from ..core.model import (
    DEFAULT_SCOPE_ORDER, Kind, Layer, MemoryFilter, MemoryRecord, Scope, ScoreComponent, SearchHit,
)
from ..core.observations import normalized
from ..core.timezones import parse_time_zone
from ..core.tokens import keyword_tokens, tsquery_from_tokens
from ..stores.postgres.memories import Scored
from .deps import Deps
from .working import WorkingService, item_to_record

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchQuery:
    text: str
    filter: MemoryFilter = MemoryFilter()
    top_k: int = 0
    token_budget: int = 0
    as_of: datetime | None = None
    scope_weights: dict[Scope, float] = field(default_factory=dict)
    scope_order: tuple[Scope, ...] = ()
    explain: bool = False
    time_zone: str | None = None


ALWAYS_PREFERENCES = 3
# The keyword channel reads this many times its share of candidates, so that BM25's term
# statistics see the common words for what they are before the list is cut.
KEYWORD_POOL = 4


def rescore_keyword(query_tokens: list[str], candidates: list[Scored]) -> list[Scored]:
    scores = bm25_scores(query_tokens, [s.terms or {} for s in candidates])
    ranked = sorted(zip(scores, range(len(candidates))), key=lambda pair: (-pair[0], pair[1]))
    return [Scored(candidates[i].record, score) for score, i in ranked if score > 0]


def collapse_duplicates(hits: list[SearchHit]) -> list[SearchHit]:
    """Keeps the best of hits that say the same thing (same kind, same normalised text)."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for hit in hits:
        key = (hit.memory.kind.value, normalized(hit.memory.content))
        if key not in seen:
            seen.add(key)
            kept.append(hit)
    return kept


def include_preferences(
    hits: list[SearchHit], preferences: list[MemoryRecord], top_k: int, *, explain: bool
) -> list[SearchHit]:
    """Preferences in scope are always in the answer (DESIGN §4): the closest few take the last
    places if ranking left them out."""
    present = {str(h.memory.id) for h in hits}
    missing = [p for p in preferences if str(p.id) not in present][: min(ALWAYS_PREFERENCES, top_k)]
    if not missing:
        return hits
    floor = min((h.score for h in hits), default=0.0)
    kept = hits[: max(0, top_k - len(missing))]
    extra = [
        SearchHit(p, floor, [ScoreComponent("preference_floor", floor, 0, "preferences in scope are always included")]
                  if explain else [])
        for p in missing
    ]
    return kept + extra


def approx_tokens(text: str) -> int:
    # About four characters a token for English; CJK runs closer to one a character, so
    # take the larger estimate to stay inside the caller's budget.
    cjk = sum(1 for ch in text if "\u3400" <= ch <= "\u9fff")
    return max(len(text) // 4, cjk) + 1


class SearchService:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self._background: set[asyncio.Task] = set()

    def _check(self, q: SearchQuery) -> int:
        s = self.deps.settings
        if not q.text or not q.text.strip():
            raise invalid("QUERY_REQUIRED", "query must not be empty or blank")
        if len(q.text.encode()) > s.max_query_bytes:
            raise invalid("QUERY_TOO_LARGE", f"query is over {s.max_query_bytes} bytes", limit=str(s.max_query_bytes))
        parse_time_zone(q.time_zone)
        if q.top_k < 0 or q.token_budget < 0:
            raise invalid("INVALID_LIMIT", "top_k and token_budget must not be negative")
        for weight in q.scope_weights.values():
            if not weight >= 0:
                raise invalid("INVALID_SCOPE_WEIGHT", "scope weights must be non-negative numbers")
        # Above the maximum is capped, not refused: a caller asking for "many" gets the most we give.
        return min(q.top_k or s.search_default_top_k, s.search_max_top_k)

    async def search(self, caller: Caller, q: SearchQuery) -> list[SearchHit]:
        top_k = self._check(q)
        caller.require_tenant()
        limit = max(self.deps.settings.search_candidates, top_k)
        query_tokens = keyword_tokens(q.text)
        tsquery = tsquery_from_tokens(query_tokens)
        query_vector = await self.deps.embedder.embed_query(q.text)

        persistent = any(layer is not Layer.WORKING for layer in q.filter.layers) or not q.filter.layers
        tasks: dict[str, asyncio.Future] = {}
        if persistent:
            store = self.deps.memories
            for suffix, windows in (("", False), ("_context", True)):
                if windows and not self.deps.settings.context_window:
                    continue
                tasks[f"vector{suffix}"] = asyncio.ensure_future(store.vector_search(
                    caller, q.filter, query_vector, limit=limit, as_of=q.as_of, windows=windows))
                if tsquery:
                    tasks[f"keyword{suffix}"] = asyncio.ensure_future(store.keyword_search(
                        caller, q.filter, tsquery, limit=limit * KEYWORD_POOL, as_of=q.as_of, windows=windows))
        if q.filter.session_id and q.filter.wants_layer(Layer.WORKING) and q.as_of is None:
            tasks["working"] = asyncio.ensure_future(self._working_channel(caller, q, query_vector, limit))
        wants_preferences = persistent and (not q.filter.kinds or Kind.PREFERENCE in q.filter.kinds)
        if wants_preferences:
            preferences = replace(q.filter, kinds=(Kind.PREFERENCE,))
            tasks["preferences"] = asyncio.ensure_future(self.deps.memories.vector_search(
                caller, preferences, query_vector, limit=ALWAYS_PREFERENCES, as_of=q.as_of))
        gathered: dict[str, list[Scored]] = dict(zip(tasks, await asyncio.gather(*tasks.values())))
        always = [s.record for s in gathered.pop("preferences", [])]
        for channel in ("keyword", "keyword_context"):
            if channel in gathered:
                gathered[channel] = rescore_keyword(query_tokens, gathered[channel])[:limit]
        results = gathered

        records: dict[str, MemoryRecord] = {}
        signals: dict[str, dict[str, float]] = {}
        for channel, scored in results.items():
            for s in scored:
                key = str(s.record.id)
                records[key] = s.record
                signals.setdefault(key, {})[channel] = s.score
        fused = reciprocal_rank_fusion(
            {ch: [str(s.record.id) for s in sc] for ch, sc in results.items()}, self.deps.settings.channel_weights
        )

        order = q.scope_order or DEFAULT_SCOPE_ORDER
        intent = detect_intent(q.text)
        now = q.as_of or datetime.now(timezone.utc)
        lambdas = self.deps.settings.recency_lambdas
        hits = []
        for key, (rrf, ranks) in fused.items():
            record = records[key]
            factors = [
                ("scope_weight", q.scope_weights.get(record.scope, 1.0), f"scope {record.scope.value}"),
                ("kind_intent", kind_bonus(intent, record.kind), f"query intent {intent.value}, kind {record.kind.value}"),
                ("recency", recency(record, now, lambdas), f"exp(-{lambdas.get(record.kind.value, 0.0)} * age_days)"),
                ("confidence", confidence_weight(record), f"0.5 + 0.5 * confidence {record.confidence:.2f}"),
            ]
            score = rrf * math.prod(value for _, value, _ in factors)
            explanation = []
            if q.explain:
                explanation = [
                    ScoreComponent(ch, signals[key][ch], ranks[ch], f"{ch} channel") for ch in results if ch in ranks
                ]
                explanation.append(ScoreComponent("rrf", rrf, 0, "weighted reciprocal rank fusion, k=60"))
                explanation.extend(ScoreComponent(name, value, 0, detail) for name, value, detail in factors)
            hits.append(SearchHit(record, score, explanation))
        rank_of_scope = {scope: i for i, scope in enumerate(order)}
        hits.sort(key=lambda h: (-h.score, rank_of_scope.get(h.memory.scope, len(order))))
        hits = collapse_duplicates([h for h in hits if h.score > 0])[:top_k]
        hits = include_preferences(hits, always, top_k, explain=q.explain)
        hits = self._within_budget(hits, q.token_budget)
        self._mark_used(caller, [h.memory.id for h in hits if h.memory.layer is not Layer.WORKING])
        return hits

    @staticmethod
    def _within_budget(hits: list[SearchHit], budget: int) -> list[SearchHit]:
        if not budget:
            return hits
        kept, used = [], 0
        for hit in hits:
            cost = approx_tokens(hit.memory.content)
            if kept and used + cost > budget:
                break
            kept.append(hit)
            used += cost
        return kept

    async def _working_channel(self, caller: Caller, q: SearchQuery, query_vector: np.ndarray, limit: int) -> list[Scored]:
        contents = await WorkingService(self.deps).contents(caller, q.filter.session_id or "", with_vectors=True)
        f = q.filter
        items = [i for i in contents.items if i["id"] in contents.vectors]
        items = [
            i for i in items
            if (not f.kinds or any(k.value == i["kind"] for k in f.kinds))
            and (not f.user_id or i["user_id"] == f.user_id)
            and set(f.tags) <= set(i["tags"])
        ]
        if not items:
            return []
        vectors = np.stack([np.frombuffer(contents.vectors[i["id"]], dtype=np.float32) for i in items])
        similarities = vectors @ query_vector
        order = np.argsort(-similarities)[:limit]
        return [Scored(item_to_record(items[i]), float(similarities[i])) for i in order]

    def _mark_used(self, caller: Caller, ids: list) -> None:
        # Usage counters are bookkeeping: the caller should not wait for them.
        task = asyncio.ensure_future(self.deps.memories.mark_used(caller, ids))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(lambda t: t.cancelled() or t.exception() and log.warning("mark_used: %s", t.exception()))
