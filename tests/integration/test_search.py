"""Search over real PostgreSQL (pgvector + full text) and Redis."""
from __future__ import annotations

import math
import os
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from memplane_server.core.errors import MemplaneError
from memplane_server.core.model import Kind, Layer, MemoryDraft, MemoryFilter, Scope
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.search.stages import recording
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres.search.reads import SearchReads

pytestmark = pytest.mark.asyncio(loop_scope="session")


def draft(content: str, kind: Kind = Kind.FACT, **kw) -> MemoryDraft:
    return MemoryDraft(**{**dict(scope=None, domain=None, agent_id=None, layer=None, kind=kind, content=content), **kw})


async def seed(deps, caller, *drafts):
    return await WriteService(deps).write(caller, list(drafts))


async def test_vector_channel_finds_a_paraphrase(deps, make_tenant):
    world = await make_tenant()
    await seed(deps, world.writer, draft("Melanie painted a sunrise over the lake last summer"),
               draft("The deploy pipeline runs on Tuesdays"), draft("Bob's favourite food is ramen"))
    hits = await SearchService(deps).search(world.writer, SearchQuery("What artwork did Melanie make?", top_k=1))
    assert hits[0].memory.content.startswith("Melanie painted")


async def test_keyword_channel_finds_chinese_by_segmented_words(deps, make_tenant):
    world = await make_tenant()
    await seed(deps, world.writer, draft("我的地址是北京朝阳区"), draft("我喜欢喝绿茶"), draft("明天下午开会"))
    hits = await SearchService(deps).search(world.writer, SearchQuery("朝阳区", top_k=3, explain=True))
    assert hits[0].memory.content == "我的地址是北京朝阳区"
    assert "keyword" in {c.name for c in hits[0].explanation}


async def test_explanation_lists_channels_fusion_and_every_factor(deps, make_tenant):
    world = await make_tenant()
    await seed(deps, world.writer, draft("Kubernetes upgrades need a drain first"))
    [hit] = await SearchService(deps).search(world.writer, SearchQuery("kubernetes drain", top_k=1, explain=True))
    names = [c.name for c in hit.explanation]
    assert names == ["vector", "keyword", "rrf", "scope_weight", "kind_intent", "recency", "confidence", "valid_time",
                     "consolidated", "lifecycle"]
    assert hit.explanation[0].rank == 1
    factors = {c.name: c.value for c in hit.explanation}
    assert hit.score == pytest.approx(factors["rrf"] * factors["scope_weight"] * factors["kind_intent"]
                                      * factors["recency"] * factors["confidence"] * factors["valid_time"]
                                      * factors["consolidated"])


async def test_filters_restrict_kinds_and_tags(deps, make_tenant):
    world = await make_tenant()
    await seed(deps, world.writer, draft("Deploy with helm upgrade", Kind.PROCEDURE, tags=("ops",)),
               draft("Deploys failed on Friday", Kind.EVENT))
    hits = await SearchService(deps).search(
        world.writer, SearchQuery("deploy", filter=MemoryFilter(kinds=(Kind.PROCEDURE,), tags=("ops",)))
    )
    assert [h.memory.kind for h in hits] == [Kind.PROCEDURE]


async def test_top_k_above_the_maximum_is_capped(deps, make_tenant):
    world = await make_tenant()
    await seed(deps, world.writer, *[draft(f"note number {i} about cats", Kind.EVENT) for i in range(5)])
    hits = await SearchService(deps).search(world.writer, SearchQuery("cats", top_k=10_000))
    assert len(hits) == 5


async def test_token_budget_cuts_the_hits(deps, make_tenant):
    world = await make_tenant()
    await seed(deps, world.writer, *[draft(f"cats are lovely animals, note {i} " + "x" * 200, Kind.EVENT)
                                     for i in range(5)])
    hits = await SearchService(deps).search(world.writer, SearchQuery("cats", top_k=5, token_budget=120))
    assert len(hits) == 2


@pytest.mark.parametrize("query, reason", [("", "QUERY_REQUIRED"), ("  \n\t", "QUERY_REQUIRED"),
                                           ("x" * 100_000, "QUERY_TOO_LARGE")])
async def test_bad_queries_are_refused(deps, make_tenant, query, reason):
    world = await make_tenant()
    with pytest.raises(MemplaneError) as err:
        await SearchService(deps).search(world.writer, SearchQuery(query))
    assert err.value.reason == reason


async def test_pending_memories_only_when_asked(deps, make_tenant):
    world = await make_tenant()
    await seed(deps, world.writer, draft("Perhaps the user likes opera", confidence=0.4))
    service = SearchService(deps)
    assert await service.search(world.writer, SearchQuery("opera")) == []
    hits = await service.search(world.writer, SearchQuery("opera", filter=MemoryFilter(include_pending=True)))
    assert len(hits) == 1


async def test_as_of_read_sees_a_memory_deleted_later(deps, make_tenant):
    world = await make_tenant()
    [m] = await seed(deps, world.writer, draft("The office is in Berlin"))
    between = datetime.now(timezone.utc)
    await ForgetService(deps).forget(world.writer, ids=[str(m.id)], f=None, hard=False, dry_run=False, reason="")
    service = SearchService(deps)
    assert await service.search(world.writer, SearchQuery("office Berlin")) == []
    past = await service.search(world.writer, SearchQuery("office Berlin", as_of=between))
    assert [h.memory.id for h in past] == [m.id]
    before = await service.search(world.writer, SearchQuery("office Berlin", as_of=between - timedelta(hours=1)))
    assert before == []


async def test_working_memory_of_the_session_is_searched(deps, make_tenant):
    world = await make_tenant()
    await seed(deps, world.agent1, draft("we are migrating the billing database", Kind.TURN, layer=Layer.WORKING,
                                         session_id="s9"))
    hits = await SearchService(deps).search(
        world.agent1, SearchQuery("billing migration", filter=MemoryFilter(session_id="s9"))
    )
    assert hits[0].memory.layer is Layer.WORKING


async def test_scope_weight_reorders_hits(deps, make_tenant):
    world = await make_tenant()
    await seed(deps, world.agent1, draft("Coffee machine is on floor 3", scope=Scope.PRIVATE))
    await seed(deps, world.writer, draft("Coffee machine is on floor 2", scope=Scope.GLOBAL))
    service = SearchService(deps)
    boosted = await service.search(world.agent1, SearchQuery("coffee machine floor", scope_weights={Scope.PRIVATE: 5.0}))
    assert boosted[0].memory.scope is Scope.PRIVATE
    boosted = await service.search(world.agent1, SearchQuery("coffee machine floor", scope_weights={Scope.GLOBAL: 5.0}))
    assert boosted[0].memory.scope is Scope.GLOBAL


async def test_search_counts_usage(deps, make_tenant):
    world = await make_tenant()
    [m] = await seed(deps, world.writer, draft("Unique zebra fact"))
    await SearchService(deps).search(world.writer, SearchQuery("zebra"))
    import asyncio

    for _ in range(50):
        used = await deps.memories.get(world.writer, m.id)
        if used.use_count:
            break
        await asyncio.sleep(0.05)
    assert used.use_count == 1 and used.last_used_at is not None


async def test_searches_close_together_count_every_use(deps, make_tenant):
    """Their counters are written together, a moment later: two searches are two uses."""
    import asyncio

    world = await make_tenant()
    [m] = await seed(deps, world.writer, draft("Unique okapi fact"))
    service = SearchService(deps)
    await asyncio.gather(service.search(world.writer, SearchQuery("okapi")),
                         service.search(world.writer, SearchQuery("okapi fact")))
    for _ in range(50):
        used = await deps.memories.get(world.writer, m.id)
        if used.use_count:
            break
        await asyncio.sleep(0.05)
    assert used.use_count == 2


async def test_how_to_questions_favour_procedures(deps, make_tenant):
    world = await make_tenant()
    await seed(deps, world.writer, draft("Deploying the API failed on Friday evening", Kind.EVENT),
               draft("To deploy the API: run migrations, then helm upgrade", Kind.PROCEDURE))
    hits = await SearchService(deps).search(world.writer, SearchQuery("how do I deploy the API?", explain=True))
    assert hits[0].memory.kind is Kind.PROCEDURE
    assert {c.name: c.value for c in hits[0].explanation}["kind_intent"] == pytest.approx(1.3)


async def test_chinese_what_is_questions_favour_facts(deps, make_tenant):
    world = await make_tenant()
    await seed(deps, world.writer, draft("用户的公司地址是上海浦东", Kind.FACT), draft("昨天讨论了公司地址的问题", Kind.EVENT))
    hits = await SearchService(deps).search(world.writer, SearchQuery("公司地址是什么", explain=True))
    assert hits[0].memory.kind is Kind.FACT


async def test_preferences_in_scope_are_always_included(deps, make_tenant):
    world = await make_tenant()
    await seed(deps, world.agent1, draft("Prefers answers in German", Kind.PREFERENCE),
               *[draft(f"Sprint {i} retro: the build pipeline was slow", Kind.EVENT) for i in range(6)])
    hits = await SearchService(deps).search(world.agent1, SearchQuery("build pipeline slow", top_k=3))
    assert len(hits) == 3 and hits[-1].memory.kind is Kind.PREFERENCE


async def test_hits_among_the_channels_leading_candidates_come_whole_without_reading_them_again(deps, make_tenant):
    world = await make_tenant()
    stored = await seed(deps, world.writer, *[draft(f"Sprint {i} retro: the build pipeline was slow", Kind.EVENT,
                                                    tags=["retro"], metadata={"sprint": i}) for i in range(4)])
    with recording() as stages:
        hits = await SearchService(deps).search(world.writer, SearchQuery("build pipeline slow", top_k=10))
    assert {h.memory.id: h.memory.metadata for h in hits} == {m.id: m.metadata for m in stored}
    assert all(h.memory.tags == ["retro"] for h in hits)
    assert "whole rows" not in {s.name for s in stages}


async def test_the_answers_whole_rows_are_read_in_the_lexical_channels_session(deps, make_tenant, monkeypatch):
    """A hit no channel read whole (here second in both the vector and the keyword ranking, each
    channel reading its first top_k whole) costs a statement in the session the lexical channels left
    open, not a session of its own; the answer is that of a search whose lexical channels run apart."""
    world = await make_tenant()
    texts = ["migration migration migration database database deploy deploy notes", "deploy the new database migration",
             "the migration of birds", "database backups nightly", "Deploying database migrations",
             "DB migration deployment", "deploy db migration",
             "how we deploy: every database migration runs in its own step with a rollback plan for the cluster"]
    await seed(deps, world.writer, *[draft(t, Kind.EVENT, metadata={"n": i}) for i, t in enumerate(texts)])
    opened = []
    original = deps.memories.read_session
    monkeypatch.setattr(deps.memories, "read_session", lambda *a, **k: opened.append(1) or original(*a, **k))
    query = SearchQuery("deploy database migration", top_k=1)
    with recording() as stages:
        [hit] = await SearchService(deps).search(world.writer, query)
    assert hit.memory.content == "Deploying database migrations" and hit.memory.metadata == {"n": 4}
    assert "whole rows" in {s.name for s in stages}
    assert len(opened) == 2  # the vector channels' session and the lexical channels'
    # As in the whole of a big tenant: each lexical channel in a session of its own.
    monkeypatch.setattr(SearchReads, "tenant_walked_whole", lambda self: True)
    assert [(h.memory, h.score) for h in await SearchService(deps).search(world.writer, query)] == [(hit.memory, hit.score)]


async def test_recency_decay_prefers_newer_when_configured(deps, make_tenant):
    from datetime import timedelta

    world = await make_tenant()
    now = datetime.now(timezone.utc)
    await seed(deps, world.writer,
               draft("Team lunch is on Wednesday at the Thai place", Kind.EVENT, occurred_at=now - timedelta(days=400)),
               draft("Team lunch is on Wednesdays at the Thai restaurant", Kind.EVENT, occurred_at=now))
    decaying = replace(deps, settings=deps.settings.model_copy(update={"recency_lambdas": {"event": 0.01}}))
    hits = await SearchService(decaying).search(world.writer, SearchQuery("team lunch", explain=True))
    assert hits[0].memory.occurred_at > now - timedelta(days=1)
    old = {c.name: c.value for c in hits[1].explanation}
    assert old["recency"] == pytest.approx(math.exp(-0.01 * 400), rel=1e-3)


async def test_identical_texts_collapse_to_one_hit(deps, make_tenant):
    world = await make_tenant()
    await seed(deps, world.writer, draft("The printer is on floor 2", Kind.EVENT), draft("the printer is on floor 2.", Kind.EVENT))
    hits = await SearchService(deps).search(world.writer, SearchQuery("printer floor"))
    assert len(hits) == 1


class ClaimedThreads:
    """The real embedder, claiming its queries keep `threads` cores busy."""

    def __init__(self, real, threads: int) -> None:
        self.real, self.threads = real, threads

    def query_threads(self, text: str) -> int:
        return self.threads

    def __getattr__(self, name: str):
        return getattr(self.real, name)


async def test_with_a_core_to_spare_the_vector_session_opens_while_the_query_is_embedded(deps, make_tenant):
    """Opened ahead (a core beside the embedding, or a remote model) or not, the answer is the same."""
    world = await make_tenant()
    await seed(deps, world.agent1, draft("we moved the billing database to Postgres 16", Kind.TURN, session_id="s7"),
               draft("Bob prefers tea", Kind.PREFERENCE, session_id="s7"),
               draft("lunch is at noon", Kind.TURN, session_id="s7"))
    query = SearchQuery("billing database", filter=MemoryFilter(session_id="s7"), top_k=3)
    answers = {}
    for spare in (False, True):
        cores = len(os.sched_getaffinity(0))
        service = SearchService(replace(deps, embedder=ClaimedThreads(deps.embedder, cores - 1 if spare else cores)))
        opened = []
        original = deps.memories.vector_session_ahead
        deps.memories.vector_session_ahead = (
            lambda *a, opened=opened, original=original, **k: opened.append(1) or original(*a, **k))
        try:
            answers[spare] = ([(h.memory.id, h.score) for h in await service.search(world.agent1, query)], len(opened))
        finally:
            del deps.memories.vector_session_ahead
    assert answers[True][0] == answers[False][0] and answers[True][0][0]
    assert (answers[False][1], answers[True][1]) == (0, 1)
