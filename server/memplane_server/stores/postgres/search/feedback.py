"""What pseudo-relevance feedback reads of the first pass's best hits (services/search/feedback.py):
their vectors and keyword tokens, under the caller's visibility like every read of memories."""
from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import asyncpg
import numpy as np

from ....core.access.caller import Caller
from ..session import caller_session
from ..sql import Params, visibility
from .plans import parse_tsvector


@dataclass(frozen=True)
class FeedbackDocument:
    id: uuid.UUID
    vector: np.ndarray | None
    terms: Mapping[str, int]


class FeedbackStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def documents(self, caller: Caller, ids: Sequence[uuid.UUID]) -> list[FeedbackDocument]:
        """The visible memories among ids, in the order of ids; an id the caller may not read
        gives nothing (the hits come from the caller's own search, and are checked again)."""
        p = Params(list(ids))
        async with caller_session(self.pool, caller) as conn:
            rows = await conn.fetch(
                f"SELECT m.id, m.embedding, m.keywords::text AS terms FROM memories m"
                f" WHERE m.id = ANY($1::uuid[]) AND {visibility(caller, p)}",
                *p.values,
            )
        by_id = {r["id"]: r for r in rows}
        return [
            FeedbackDocument(i, None if r["embedding"] is None else r["embedding"].to_numpy().astype(np.float32),
                             parse_tsvector(r["terms"] or ""))
            for i in ids if (r := by_id.get(i)) is not None
        ]

    async def common_shares(self, tenant_id: str) -> dict[str, float]:
        """The caller's tenant's common terms with the share of its rows holding each (migration
        0013); counted over the tenant's own keywords. Read as the owner, like the counting: the
        table holds no memory, only shares of the tenant's own rows."""
        common = await self.pool.fetchval(
            "SELECT common FROM keyword_stats WHERE tenant_id = $1 AND field = 'keywords'", tenant_id)
        return {term: float(share) for term, share in (common or {}).items()}
