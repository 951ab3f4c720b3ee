"""The working-memory channel of Search: the session's items in Redis, ranked by their vectors'
similarity to the query's, under the search's filter."""
from __future__ import annotations

from collections.abc import Awaitable

import numpy as np

from ...core.model import MemoryFilter, Scored
from ...core.working import SessionContents, item_to_record


async def working_channel(f: MemoryFilter, reading: Awaitable[SessionContents], query_vector: np.ndarray,
                          limit: int) -> list[Scored]:
    contents = await reading
    items = [
        i for i in contents.items
        if i.id in contents.vectors
        and (not f.kinds or i.kind in f.kinds)
        and (not f.user_id or i.user_id == f.user_id)
        and set(f.tags) <= set(i.tags)
    ]
    if not items:
        return []
    vectors = np.stack([contents.vectors[i.id] for i in items])
    similarities = vectors @ query_vector
    order = np.argsort(-similarities)[:limit]
    return [Scored(item_to_record(items[i]), float(similarities[i])) for i in order]
