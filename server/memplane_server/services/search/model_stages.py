"""The optional stages of Search that ask the LLM: rewrites of the query (more vector channels) and a
rerank of the leading hits. Both fall back to the search without them when the model fails."""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from ...core.access.caller import Caller
from ...core.model import MemoryFilter, ScoreComponent, Scored, SearchHit
from ...llm.chat import went_without
from ...llm.query_rewrite import QueryRewriter
from ...llm.rerank import MAX_CANDIDATES, Reranker
from .deps import SearchDeps

log = logging.getLogger(__name__)


async def rewrite_channels(deps: SearchDeps, caller: Caller, text: str, f: MemoryFilter, *, limit: int,
                           as_of: datetime | None) -> dict[str, list[Scored]]:
    """Nearest memories to each LLM rephrasing of the query; nothing when the model fails."""
    try:
        assert deps.llm is not None, "settings refuse search_rewrite without llm_model"
        rewrites = await asyncio.wait_for(QueryRewriter(deps.llm).rewrite(text), deps.settings.search_llm_timeout_seconds)
        vectors = [await deps.embedder.embed_query(rewrite) for rewrite in rewrites]
    except Exception as exc:  # an optional stage: the search goes on without it
        if reason := went_without("query_rewrite", exc):
            log.debug("query rewrite skipped (%s), searching without it", reason)
        else:
            log.warning("query rewrite failed, searching without it: %s", exc)
        return {}
    found = await asyncio.gather(*(deps.memories.vector_search(caller, f, v, limit=limit, as_of=as_of) for v in vectors))
    return {f"rewrite{i}": scored for i, scored in enumerate(found, 1)}


async def reranked(deps: SearchDeps, text: str, hits: list[SearchHit], *, explain: bool) -> list[SearchHit]:
    """The LLM orders the leading candidates; hits keep the scores of the places they take, so
    scores still fall down the list. On failure the fused order stands."""
    pool = hits[:MAX_CANDIDATES]
    try:
        assert deps.llm is not None, "settings refuse search_rerank without llm_model"
        order = await asyncio.wait_for(
            Reranker(deps.llm).rerank(text, [(str(h.memory.id), h.memory.content) for h in pool], len(pool)),
            deps.settings.search_llm_timeout_seconds)
    except Exception as exc:  # an optional stage: the fused order is a fine answer
        if reason := went_without("rerank", exc):
            log.debug("rerank skipped (%s), keeping the fused order", reason)
        else:
            log.warning("rerank failed, keeping the fused order: %s", exc)
        return hits
    by_id = {str(h.memory.id): h for h in pool}
    ordered = []
    for place, memory_id in enumerate(order):
        hit = by_id[memory_id]
        note = [ScoreComponent("rerank", pool[place].score, place + 1, f"LLM rerank, was #{pool.index(hit) + 1}")]
        ordered.append(SearchHit(hit.memory, pool[place].score, hit.explanation + note if explain else []))
    return ordered + hits[MAX_CANDIDATES:]
