"""Search starts its lexical channels (keyword, keyword_context, exact) while the query is being
embedded, and the vector-family ones once it is: the answers it fuses are each channel's own."""
from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter
from memplane_server.core.retrieval.intent import detect_intent
from memplane_server.core.retrieval.time_expressions import parse_time_range
from memplane_server.core.retrieval.tokens import keyword_tokens, lookup_names
from memplane_server.services.search.channels import PREFERENCES, QueryParts, plan_channels
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres.memories import MemoryStore
from memplane_server.stores.postgres.search import lexical, nearest

pytestmark = pytest.mark.asyncio(loop_scope="session")

QUERY = "What is Ana's email address?"
LEXICAL = {"keyword", "exact"}


def draft(content: str, **kw) -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, content=content, **kw)


async def world_with_ana(deps, make_tenant):
    world = await make_tenant()
    start = datetime(2024, 3, 1, tzinfo=timezone.utc)
    await WriteService(deps).write(world.writer, [
        draft("Ana can be reached at ana@example.org", kind=Kind.FACT, entity="ana", attribute="email",
              value="ana@example.org"),
        draft("Ana moved her email to the new address last spring", kind=Kind.FACT, entity="ana",
              attribute="address", value="Lisbon"),
        draft("Prefers short answers by email", kind=Kind.PREFERENCE),
        *(draft(f"turn {i}: {text}", kind=Kind.TURN, session_id="s1", occurred_at=start + timedelta(minutes=i))
          for i, text in enumerate(["Ana asked about the invoice", "The address on the form was wrong",
                                    "We emailed the accountant", "Lunch on Friday at noon",
                                    "Ana's new phone arrives next week", "The email bounced twice"])),
    ])
    return world


class HeldEmbedder:
    """The real embedder, claiming its queries keep `threads` cores busy, whose answers are handed
    back only once the lexical channels' statements were sent to PostgreSQL (or after `hold`
    seconds), so the order seen does not depend on which side is faster on the machine: a search
    that waits for the vector before starting them shows the embedding first."""

    def __init__(self, real, sent: asyncio.Event, events: list[str], *, threads: int, hold: float) -> None:
        self.real, self.sent, self.events = real, sent, events
        self.threads, self.hold = threads, hold

    def query_threads(self, text: str) -> int:
        return self.threads

    async def embed_query(self, text: str):
        vector = await self.real.embed_query(text)
        try:
            await asyncio.wait_for(self.sent.wait(), self.hold)
        except TimeoutError:
            pass
        self.events.append("embedded")
        return vector

    def __getattr__(self, name: str):
        return getattr(self.real, name)


async def search_observed(deps, make_tenant, monkeypatch, *, threads: int, hold: float,
                          memory_filter: MemoryFilter = MemoryFilter(kinds=(Kind.FACT,)), big: bool = False,
                          statements: list[set[str]] | None = None) -> list[str]:
    """What happened, in order: the channels of each statement sent ("keyword", "exact", "other")
    and "embedded"; each statement's channels also go to `statements`.
    With big, the tenant is known to be one its vector channels walk (as after an earlier search)."""
    world = await world_with_ana(deps, make_tenant)
    if big:
        monkeypatch.setattr(nearest, "WALK_MIN_SHARE", 0.0)
        deps = replace(deps, memories=MemoryStore(deps.memories.pool, default_max_memories=0, walk_min_memories=1))
        async with deps.memories.session(world.writer) as conn:
            assert await deps.memories.walks.big(conn, world.tenant_id)
    events: list[str] = []
    sent = asyncio.Event()
    real_rows = lexical.search_rows

    async def observed_rows(conn, sql, *params):
        # The statement leaves for PostgreSQL here (stores/postgres/search/plans.py); together, the
        # lexical channels are one statement.
        channels = [name for name, marker in (("keyword", "mp_keyword_matches"), ("exact", "entity_key = ANY"))
                    if marker in sql] or ["other"]
        events.extend(channels)
        if statements is not None:
            statements.append(set(channels))
        if LEXICAL <= set(events):
            sent.set()
        return await real_rows(conn, sql, *params)

    monkeypatch.setattr(lexical, "search_rows", observed_rows)
    held = replace(deps, embedder=HeldEmbedder(deps.embedder, sent, events, threads=threads, hold=hold))
    hits = await SearchService(held).search(world.writer, SearchQuery(QUERY, filter=memory_filter))
    assert hits
    return events


async def test_the_lexical_channels_statements_are_sent_while_the_query_is_embedded_when_a_core_is_spare(
        deps, make_tenant, monkeypatch):
    events = await search_observed(deps, make_tenant, monkeypatch, threads=0, hold=10)
    assert "embedded" in events and LEXICAL <= set(events[:events.index("embedded")]), events


async def test_on_the_one_core_a_query_leaves_the_lexical_channels_run_meanwhile_as_one_statement(
        deps, make_tenant, monkeypatch):
    statements: list[set[str]] = []
    events = await search_observed(deps, make_tenant, monkeypatch, threads=len(os.sched_getaffinity(0)) - 1, hold=10,
                                   statements=statements)
    assert "embedded" in events and LEXICAL <= set(events[:events.index("embedded")]), events
    assert statements[0] == LEXICAL, statements


async def test_the_query_is_embedded_alone_when_its_embedding_keeps_every_core_busy(deps, make_tenant, monkeypatch):
    events = await search_observed(deps, make_tenant, monkeypatch, threads=len(os.sched_getaffinity(0)), hold=0)
    assert events.index("embedded") == 0 and LEXICAL <= set(events), events


async def test_the_lexical_channels_of_a_whole_big_tenant_run_while_the_query_is_embedded(deps, make_tenant, monkeypatch):
    events = await search_observed(deps, make_tenant, monkeypatch, threads=len(os.sched_getaffinity(0)), hold=10,
                                   memory_filter=MemoryFilter(), big=True)
    assert "embedded" in events and LEXICAL <= set(events[:events.index("embedded")]), events


async def test_search_fuses_each_channels_own_answer(deps, make_tenant):
    world = await world_with_ana(deps, make_tenant)
    hits = await SearchService(deps).search(world.writer, SearchQuery(QUERY, top_k=100, explain=True))
    parts = QueryParts(await deps.embedder.embed_query(QUERY), list(dict.fromkeys(keyword_tokens(QUERY))),
                       lookup_names(QUERY), detect_intent(QUERY), parse_time_range(QUERY, deps.clock(), None))
    plan = plan_channels(deps.memories, deps.settings, world.writer, MemoryFilter(), parts,
                         limit=max(deps.settings.search_candidates, 100), as_of=None)
    assert LEXICAL | {"vector"} <= set(plan)
    alone = {name: {s.record.id: s.score for s in await run()} for name, run in plan.items() if name != PREFERENCES}
    fused: dict[str, dict[int, object]] = {name: {} for name in alone}
    for hit in hits:
        for c in hit.explanation:
            if c.name in fused:
                fused[c.name][c.rank] = hit.memory.id  # (its value is a score or a share of fusion)
    assert all(alone[name] for name in LEXICAL | {"vector"})
    for name, scores in alone.items():
        order = [fused[name][rank] for rank in sorted(fused[name])]
        assert sorted(fused[name]) == list(range(1, len(scores) + 1)) and set(order) == set(scores), name
        # In the channel's own order; rows it scores alike (written in one batch) fall either way.
        assert [scores[i] for i in order] == sorted(scores.values(), reverse=True), name
