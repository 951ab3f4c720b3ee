"""`memplane reembed`: move stored vectors to an embedding model, resumably, while serving."""
from __future__ import annotations

import argparse
import asyncio
import sys
import time

from ..settings import Settings
from .database import tool_database


def run(args: argparse.Namespace, settings: Settings) -> int:
    from ..key_setup import open_with_keys
    from ..llm.embedders import background_threads, create_embedder
    from ..services.write.reembed import reembed
    from ..stores.postgres.bulk.embeddings import EmbeddingStore
    from ..stores.postgres.pool import VECTOR_DIM, create_pool

    open_with_keys(settings)  # the texts it embeds again are sealed

    model = args.model or settings.embedding_model
    embedder = create_embedder(
        model, dim=VECTOR_DIM, threads=settings.embed_threads, batch_size=args.batch,
        api_base=settings.llm_api_base, api_key=settings.llm_api_key, timeout=settings.llm_timeout_seconds,
        background_threads=background_threads(settings.background_embed_threads),
    )
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        rate = done / max(time.monotonic() - started, 1e-9)
        width = 30
        filled = width * done // total if total else width
        print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {rate:.1f}/s", end="",
              file=sys.stderr, flush=True)

    async def run(url: str) -> int:
        pool = await create_pool(url, size=2, ef_search=settings.hnsw_ef_search)
        try:
            return await reembed(EmbeddingStore(pool), embedder, tenant_id=args.tenant, batch_size=args.batch,
                                 progress=progress)
        finally:
            await pool.close()
            embedder.close()

    with tool_database(settings) as url:
        done = asyncio.run(run(url))
    print(f"\nre-embedded {done} memories with {model}", file=sys.stderr)
    return 0
