"""Search's optional LLM stages (query rewrite, rerank) through litellm against a local
OpenAI-compatible server: used when on, skipped when the model fails."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from memplane_server.core.model import Kind, MemoryDraft
from memplane_server.llm.chat import ChatModel
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService
from tests.support.fake_llm import Reply

pytestmark = pytest.mark.asyncio(loop_scope="session")
TEXTS = ["The build cache lives in S3", "Deploys need two approvals", "Rollbacks use the previous image tag"]


def with_stages(deps, fake_llm, **stages):
    settings = deps.settings.model_copy(update={"llm_model": "openai/test-model", "search_llm_timeout_seconds": 2.0,
                                                **stages})
    return replace(deps, settings=settings,
                   llm=ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="k", timeout=2))


async def seeded(deps, make_tenant):
    world = await make_tenant()
    drafts = [MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.FACT, content=t) for t in TEXTS]
    return world, await WriteService(deps).write(world.writer, drafts)


def chat_requests(fake_llm):
    return [r for r in fake_llm.requests if r["path"].endswith("/chat/completions")]


async def test_rewrite_searches_the_models_rephrasings_as_channels(deps, make_tenant, fake_llm):
    world, _ = await seeded(deps, make_tenant)
    fake_llm.script(Reply(json.dumps({"queries": ["how are releases rolled back", "undo a deployment"]})))
    hits = await SearchService(with_stages(deps, fake_llm, search_rewrite=True)).search(
        world.writer, SearchQuery("revert a bad release", explain=True))
    assert {"rewrite1", "rewrite2"} <= {c.name for h in hits for c in h.explanation}
    assert "revert a bad release" in chat_requests(fake_llm)[0]["body"]["messages"][1]["content"]


async def test_a_failing_rewrite_leaves_the_search_as_without_it(deps, make_tenant, fake_llm):
    world, _ = await seeded(deps, make_tenant)
    fake_llm.script(Reply(status=500, content="down"))
    plain = await SearchService(deps).search(world.writer, SearchQuery("revert a bad release"))
    hits = await SearchService(with_stages(deps, fake_llm, search_rewrite=True)).search(
        world.writer, SearchQuery("revert a bad release"))
    assert [h.memory.id for h in hits] == [h.memory.id for h in plain]


async def test_rerank_orders_hits_as_the_model_ranks_them(deps, make_tenant, fake_llm):
    world, stored = await seeded(deps, make_tenant)
    plain = await SearchService(deps).search(world.writer, SearchQuery("release process"))
    fake_llm.script(Reply(json.dumps({"ranking": [3, 2, 1]})))
    hits = await SearchService(with_stages(deps, fake_llm, search_rerank=True)).search(
        world.writer, SearchQuery("release process", explain=True))
    assert [h.memory.id for h in hits] == [h.memory.id for h in reversed(plain)]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].explanation[-1].name == "rerank"


async def test_a_slow_reranker_is_skipped_for_the_fused_order(deps, make_tenant, fake_llm):
    world, _ = await seeded(deps, make_tenant)
    plain = await SearchService(deps).search(world.writer, SearchQuery("release process"))
    fake_llm.script(Reply(json.dumps({"ranking": [3, 2, 1]}), delay=3.0))
    stages = with_stages(deps, fake_llm, search_rerank=True, search_llm_timeout_seconds=0.5)
    hits = await SearchService(stages).search(world.writer, SearchQuery("release process"))
    assert [h.memory.id for h in hits] == [h.memory.id for h in plain]

