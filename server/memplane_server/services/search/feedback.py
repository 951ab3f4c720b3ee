"""The second pass of Search: pseudo-relevance feedback (core/retrieval/feedback.py) from the first pass's
best hits, as two more channels fused with the first pass's. Only hits the caller was served,
read again under its visibility, feed it."""
from __future__ import annotations

import asyncio
from datetime import datetime

from ...core.access.caller import Caller
from ...core.model import Layer, MemoryFilter, Scored, SearchHit
from ...core.retrieval.feedback import expansion_terms, rocchio
from ...stores.postgres.memories import MemoryStore
from ...stores.postgres.search.feedback import FeedbackStore
from ...stores.postgres.search.keyword_stats import FLOOR_SHARE
from .channels import KEYWORD_POOL, QueryParts
from .deps import SearchSettings

VECTOR, KEYWORD = "vector_feedback", "keyword_feedback"


def wanted(settings: SearchSettings) -> bool:
    return settings.search_feedback_docs > 0 and (settings.search_feedback_vector > 0 or settings.search_feedback_terms > 0)


async def feedback_channels(
    memories: MemoryStore, store: FeedbackStore, settings: SearchSettings, caller: Caller, f: MemoryFilter,
    parts: QueryParts, hits: list[SearchHit], *, limit: int, as_of: datetime | None,
) -> dict[str, list[Scored]]:
    """The second pass's rankings by channel; none when the first pass found nothing stored."""
    ids = [h.memory.stored_id for h in hits if h.memory.layer is not Layer.WORKING][:settings.search_feedback_docs]
    if not ids:
        return {}
    terms_wanted = settings.search_feedback_terms > 0 and bool(parts.terms)
    docs, shares = await asyncio.gather(
        store.documents(caller, ids),
        store.common_shares(caller.require_tenant()) if terms_wanted else asyncio.sleep(0, {}))
    runs = {}
    vectors = [d.vector for d in docs if d.vector is not None]
    if settings.search_feedback_vector > 0 and vectors:
        assert parts.vector is not None, "the second pass follows the first, which embedded the query"
        moved = rocchio(parts.vector, vectors, settings.search_feedback_vector)
        runs[VECTOR] = memories.vector_search(caller, f, moved, limit=limit, as_of=as_of)
    if terms_wanted:
        extra = await asyncio.to_thread(  # a few documents' terms, but sorting is CPU work all the same
            expansion_terms, parts.terms, [d.terms for d in docs], shares, count=settings.search_feedback_terms,
            max_share=settings.keyword_common_share, unlisted_share=FLOOR_SHARE)
        if extra:
            terms = [*parts.terms, *extra]
            weights = {**{t: 1.0 for t in parts.terms},
                       **{t: settings.search_feedback_term_weight * w for t, w in extra.items()}}
            runs[KEYWORD] = memories.keyword_search(
                caller, f, terms, pool=limit * KEYWORD_POOL, as_of=as_of, limit=limit, weights=weights,
                common_share=settings.keyword_common_share)
    return dict(zip(runs, await asyncio.gather(*runs.values())))
