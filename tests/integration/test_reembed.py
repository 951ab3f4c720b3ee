"""Embedding providers through litellm (against a local OpenAI-compatible server) and
`reembed`, which moves stored vectors to another model resumably."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import pytest

from memplane_server.core.errors import MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter
from memplane_server.llm.embedders import LitellmEmbedder
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.context import ContextService
from memplane_server.services.write.reembed import reembed
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres.bulk.embeddings import EmbeddingStore
from tests.support.fake_llm import FakeLLM
from tests.support.keys import ENCRYPTION_KEYS

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture
def provider():
    fake = FakeLLM().start()
    yield fake
    fake.stop()


def events(n: int) -> list[MemoryDraft]:
    return [MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.EVENT,
                        content=f"deploy number {i} finished") for i in range(n)]


def remote(provider, dim: int = 384) -> LitellmEmbedder:
    return LitellmEmbedder("openai/fake-embed", dim=dim, api_base=provider.api_base, api_key="k", timeout=5)


async def test_reembed_moves_one_tenant_and_can_resume(deps, make_tenant, provider):
    world, other = await make_tenant(), await make_tenant()
    await WriteService(deps).write(world.writer, events(5))
    await WriteService(deps).write(other.writer, events(2))
    store, embedder = EmbeddingStore(deps.memories.pool), remote(provider)
    assert await store.count_stale("openai/fake-embed", world.tenant_id) == 5
    first = await reembed(store, embedder, tenant_id=world.tenant_id, batch_size=2, max_batches=1)
    assert first == 2
    seen = []
    rest = await reembed(store, embedder, tenant_id=world.tenant_id, batch_size=2,
                         progress=lambda done, total: seen.append((done, total)))
    assert rest == 3 and seen[0] == (0, 3) and seen[-1] == (3, 3)
    assert await store.count_stale("openai/fake-embed", world.tenant_id) == 0
    assert await store.count_stale("openai/fake-embed", other.tenant_id) == 2
    models = await deps.memories.pool.fetch("SELECT DISTINCT embedding_model FROM memories WHERE tenant_id = $1",
                                            world.tenant_id)
    assert [r["embedding_model"] for r in models] == ["openai/fake-embed"]


async def test_reembedding_empties_the_turn_windows_of_the_old_model_and_queues_them(deps, make_tenant, provider):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, [
        MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.TURN, content=text, session_id="chat")
        for text in ("Ana: hi", "Ben: hello")
    ])
    service = ContextService(deps)
    while (await deps.contexts.backlog(world.writer)).sessions:
        await service.refresh_next()
    await reembed(EmbeddingStore(deps.memories.pool), remote(provider), tenant_id=world.tenant_id, batch_size=10)
    marks = await deps.memories.pool.fetch("SELECT context_of, context_embedding FROM memories WHERE tenant_id = $1",
                                           world.tenant_id)
    assert [(m["context_of"], m["context_embedding"]) for m in marks] == [("", None), ("", None)]
    assert (await deps.contexts.backlog(world.writer)).sessions == 1


async def test_a_litellm_embedding_model_serves_writes_and_search(deps, make_tenant, provider):
    world = await make_tenant()
    via_provider = replace(deps, embedder=remote(provider))
    await WriteService(via_provider).write(world.writer, events(3))
    hits = await SearchService(via_provider).search(world.writer, SearchQuery("deploy number 1 finished", top_k=1))
    assert hits[0].memory.content == "deploy number 1 finished"
    assert hits[0].memory.embedding_model == "openai/fake-embed"
    assert any(r["path"].endswith("/embeddings") for r in provider.requests)


async def test_wrong_dimension_from_the_provider_fails_cleanly_and_writes_nothing(deps, make_tenant, provider):
    world = await make_tenant()
    provider.dim = 16
    with pytest.raises(MemplaneError) as err:
        await WriteService(replace(deps, embedder=remote(provider))).write(world.writer, events(2))
    assert err.value.reason == "EMBEDDING_DIMENSION_MISMATCH"
    from memplane_server.services.memories import MemoriesService

    assert (await MemoriesService(deps).stats(world.writer, MemoryFilter())).total == 0


async def test_the_cli_reembeds_a_tenant_with_a_progress_bar(deps, settings, make_tenant, provider):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, events(3))
    env = {**os.environ, "MEMPLANE_DATABASE_URL": settings.database_url, "MEMPLANE_LLM_API_BASE": provider.api_base,
           "MEMPLANE_LLM_API_KEY": "k", "MEMPLANE_ENCRYPTION_KEYS": ENCRYPTION_KEYS}
    out = subprocess.run([sys.executable, "-m", "memplane_server.cli", "reembed", "--model", "openai/cli-embed",
                          "--tenant", world.tenant_id, "--batch", "2"], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "3/3" in out.stderr and "re-embedded 3 memories with openai/cli-embed" in out.stderr
    assert await EmbeddingStore(deps.memories.pool).count_stale("openai/cli-embed", world.tenant_id) == 0
