"""The graph channel of Search: from the first pass's best hits to the memories that
share their rarer entities (people, places, organisations, products, events: core/write/entities.py)
or the query's own, so an answer whose parts were said in different sessions comes back together.
Runs after the other channels, on their fused order; one statement of the entity index
(stores/postgres/search/entities.py, migration 0017)."""
from __future__ import annotations

import asyncio
import math
import uuid
from dataclasses import dataclass, replace
from datetime import datetime

from ...core.access.caller import Caller
from ...core.model import Layer, MemoryFilter, Scored, SearchHit
from ...core.retrieval.fusion import reciprocal_rank_fusion
from ...core.write.entities import extract_entities
from ...stores.postgres.search.entities import EntityStore, Links

CHANNEL = "graph"
SEEDS = 10  # first-pass hits whose entities are followed
QUERY_WEIGHT = 1.0  # an entity the query names counts this much, one a seed holds 1 / (1 + its rank)


@dataclass(frozen=True)
class GraphResult:
    scored: list[Scored]
    why: dict[str, str]  # memory id -> which entities linked it, for the score explanation


def seeds_of(first_pass: dict[str, list[Scored]], weights: dict[str, float]) -> list[uuid.UUID]:
    """The first pass's best stored memories, by the same fusion that orders the answer. Working
    items are left out: the entity index holds none, so as seeds they would link nothing and take
    the places of memories that do."""
    fused = reciprocal_rank_fusion({ch: [s.record.stored_id for s in scored if s.record.layer is not Layer.WORKING]
                                    for ch, scored in first_pass.items()}, weights)
    return [memory_id for memory_id, _ in sorted(fused.items(), key=lambda kv: -kv[1][0])][:SEEDS]


def rank_links(links: Links, seeds: list[uuid.UUID], query_entities: list[str], limit: int) -> GraphResult:
    """Each linked memory scores the rarity (log of tenant rows over rows holding it: nothing for an
    entity every row holds) of every entity it shares, times how strongly the query (QUERY_WEIGHT)
    or the best other seed holding it (1 / (1 + rank)) points there. A memory linked by nothing but
    its own entities scores nothing; ties keep the first pass's order."""
    asked = set(query_entities)
    place = {seed: i for i, seed in enumerate(seeds, 1)}
    holders: dict[str, list[uuid.UUID]] = {}
    for seed, entities in links.seed_entities.items():
        for entity in entities:
            holders.setdefault(entity, []).append(seed)
    total = max(links.tenant_rows, 1)
    ranked: list[tuple[float, Scored, str]] = []
    for linked in links.linked:
        score, reasons = 0.0, []
        for entity, holding in sorted(linked.entities.items(), key=lambda kv: kv[1]):
            pull = QUERY_WEIGHT if entity in asked else 0.0
            via = [place[s] for s in holders.get(entity, []) if s != linked.record.stored_id]
            if via:
                pull = max(pull, 1 / (1 + min(via)))
            if pull:
                score += pull * math.log(max(total, holding) / holding)
                source = "the query" if entity in asked else f"hit #{min(via)}"
                reasons.append(f"{entity!r} ({holding} of {total} rows) with {source}")
        if score > 0:
            ranked.append((score, Scored(linked.record, score), "; ".join(reasons)))
    ranked.sort(key=lambda t: (-t[0], place.get(t[1].record.stored_id, len(place) + 1)))
    ranked = ranked[:limit]
    return GraphResult([s for _, s, _ in ranked], {str(s.record.id): why for _, s, why in ranked})


class GraphChannel:
    def __init__(self, store: EntityStore, *, weight: float, max_rows: int) -> None:
        self.store, self.weight, self.max_rows = store, weight, max_rows

    @property
    def enabled(self) -> bool:
        return self.weight > 0

    async def search(
        self, caller: Caller, f: MemoryFilter, text: str, first_pass: dict[str, list[Scored]],
        weights: dict[str, float], *, limit: int, as_of: datetime | None,
    ) -> GraphResult:
        seeds = seeds_of(first_pass, weights)
        query_entities = await asyncio.to_thread(extract_entities, text)
        if not seeds and not query_entities:
            return GraphResult([], {})
        links = await self.store.links(caller, f, seeds, query_entities, max_rows=self.max_rows, as_of=as_of)
        return rank_links(links, seeds, query_entities, limit)


def explain_links(hits: list[SearchHit], why: dict[str, str]) -> None:
    """The graph component of each hit's explanation names the entities that linked it."""
    for hit in hits:
        if (reason := why.get(str(hit.memory.id))) is not None:
            hit.explanation[:] = [replace(c, detail=f"{c.detail}: shares {reason}") if c.name == CHANNEL else c
                                  for c in hit.explanation]
