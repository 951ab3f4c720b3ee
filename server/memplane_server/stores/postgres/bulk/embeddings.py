"""SQL for moving stored vectors to another embedding model, batch by batch, while serving."""
from __future__ import annotations

from collections.abc import Sequence

import asyncpg
import numpy as np

from ....core.model import Kind, StaleEmbedding
from ...sealing import Texts, open_texts
from ..contexts import WINDOW_KINDS, mark_sessions


class EmbeddingStore:
    """Runs as the owner: re-embedding is an operator's job across tenants, not a caller's."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def count_stale(self, model: str, tenant_id: str | None) -> int:
        return await self.pool.fetchval(
            "SELECT count(*) FROM memories WHERE embedding_model IS DISTINCT FROM $1"
            " AND ($2::text IS NULL OR tenant_id = $2)",
            model, tenant_id,
        )

    async def stale_batch(
        self, model: str, tenant_id: str | None, after: tuple[str, object] | None, limit: int
    ) -> list[StaleEmbedding]:
        """The next rows (in key order) whose vector comes from another model."""
        rows = await self.pool.fetch(
            "SELECT tenant_id, id, session_id, kind, content, context, sealed_key FROM memories"
            " WHERE embedding_model IS DISTINCT FROM $1"
            " AND ($2::text IS NULL OR tenant_id = $2) AND ($3::text IS NULL OR (tenant_id, id) > ($3, $4::uuid))"
            " ORDER BY tenant_id, id LIMIT $5",
            model, tenant_id, after[0] if after else None, after[1] if after else None, limit,
        )
        out = []
        for r in rows:
            texts = open_texts(r["sealed_key"], r["tenant_id"], Texts(r["content"], r["context"], None, {}))
            out.append(StaleEmbedding(r["tenant_id"], r["id"], r["session_id"], Kind(r["kind"]), texts.content,
                                      texts.context, (r["content"], r["context"])))
        return out

    async def save(self, rows: Sequence[StaleEmbedding], vectors: np.ndarray, model: str) -> int:
        """Stores new vectors; a row whose text changed meanwhile keeps the vector its update gave it.
        Windows built with the old model are emptied and rebuilt: vectors of two models do not compare."""
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.executemany(
                "UPDATE memories SET embedding = $5, embedding_model = $6"
                " WHERE tenant_id = $1 AND id = $2 AND content = $3 AND context = $4",
                [(r.tenant_id, r.id, *(r.stored or (r.content, r.context)), v, model) for r, v in zip(rows, vectors)],
            )
            await mark_sessions(
                conn, [(r.tenant_id, r.session_id) for r in rows if r.kind.value in WINDOW_KINDS], clear=True
            )
        return len(rows)
