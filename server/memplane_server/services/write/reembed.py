"""Moves a tenant's (or every) stored vector to the configured embedding model, resumably:
only rows still on another model are read, so a stopped run continues where it was. It runs
beside a serving server, so its embedding is background work (at the lowest CPU priority, on at
most MEMPLANE_BACKGROUND_EMBED_THREADS cores: llm/embedders.py)."""
from __future__ import annotations

from collections.abc import Callable

from ...llm.embedders import Embedder
from ...stores.postgres.bulk.embeddings import EmbeddingStore


async def reembed(
    store: EmbeddingStore,
    embedder: Embedder,
    *,
    tenant_id: str | None,
    batch_size: int,
    progress: Callable[[int, int], None] = lambda done, total: None,
    max_batches: int | None = None,
) -> int:
    """Re-embeds rows not on embedder.model_id; returns how many were done."""
    total = await store.count_stale(embedder.model_id, tenant_id)
    done, after, batches = 0, None, 0
    progress(0, total)
    while max_batches is None or batches < max_batches:
        rows = await store.stale_batch(embedder.model_id, tenant_id, after, batch_size)
        if not rows:
            break
        vectors = await embedder.embed_passages([r.embedding_text for r in rows], background=True)
        done += await store.save(rows, vectors, embedder.model_id)
        after = (rows[-1].tenant_id, rows[-1].id)
        batches += 1
        progress(done, total)
    return done
