"""Search's exact and time channels, and routing by intent, over real PostgreSQL."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memplane_server.core.model import Kind, MemoryDraft, Status
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService

pytestmark = pytest.mark.asyncio(loop_scope="session")


def fact(entity: str, attribute: str, value: str, content: str, valid_from: datetime | None = None) -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.FACT, content=content,
                       entity=entity, attribute=attribute, value=value, valid_from=valid_from)


def event(content: str, when: datetime) -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.EVENT, content=content,
                       occurred_at=when)


async def search(deps, caller, text: str, **kw):
    return await SearchService(deps).search(caller, SearchQuery(text, explain=True, **kw))


def channels(hit) -> set[str]:
    return {c.name for c in hit.explanation}


async def noise(deps, caller, n: int = 6) -> None:
    await WriteService(deps).write(caller, [
        MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.FACT, content=f"note {i} about email and addresses")
        for i in range(n)
    ])


async def test_what_is_question_finds_the_fact_by_entity_and_attribute(deps, make_tenant):
    world = await make_tenant()
    await noise(deps, world.writer)
    [stored] = await WriteService(deps).write(world.writer, [fact("user", "email", "ana@example.org", "Ana can be reached at ana@example.org")])
    [top, *_] = await search(deps, world.writer, "What is my email?")
    assert top.memory.id == stored.id
    assert "exact" in channels(top)


async def test_chinese_question_finds_the_fact_by_attribute(deps, make_tenant):
    world = await make_tenant()
    await noise(deps, world.writer)
    [stored] = await WriteService(deps).write(world.writer, [fact("user", "邮箱", "li@example.cn", "李雷的联系方式是 li@example.cn")])
    [top, *_] = await search(deps, world.writer, "我的邮箱是什么？")
    assert top.memory.id == stored.id and "exact" in channels(top)


async def test_a_fact_question_raises_the_exact_channel_weight(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, [fact("user", "city", "Lisbon", "Lives in Lisbon")])
    [hit] = await search(deps, world.writer, "What is my city?", top_k=1)
    [exact] = [c for c in hit.explanation if c.name == "exact"]
    assert "weight 2" in exact.detail


async def test_history_question_returns_replaced_versions_too(deps, make_tenant):
    world = await make_tenant()
    [berlin] = await WriteService(deps).write(world.writer, [fact("user", "city", "Berlin", "The user lives in Berlin")])
    [lisbon] = await WriteService(deps).write(world.writer, [fact("user", "city", "Lisbon", "The user lives in Lisbon")])
    hits = {h.memory.id: h for h in await search(deps, world.writer, "Did I change my city?")}
    assert hits[berlin.id].memory.status is Status.SUPERSEDED
    assert lisbon.id in hits


async def test_a_present_tense_question_does_not_return_replaced_versions(deps, make_tenant):
    world = await make_tenant()
    [berlin] = await WriteService(deps).write(world.writer, [fact("user", "city", "Berlin", "The user lives in Berlin")])
    [lisbon] = await WriteService(deps).write(world.writer, [fact("user", "city", "Lisbon", "The user lives in Lisbon")])
    ids = [h.memory.id for h in await search(deps, world.writer, "What is my city?")]
    assert ids[0] == lisbon.id and berlin.id not in ids


async def test_a_question_about_a_past_year_finds_the_fact_valid_then(deps, make_tenant):
    world = await make_tenant()
    jan_2021, mar_2023 = datetime(2021, 1, 1, tzinfo=timezone.utc), datetime(2023, 3, 1, tzinfo=timezone.utc)
    [berlin] = await WriteService(deps).write(world.writer, [fact("user", "city", "Berlin", "The user lives in Berlin", jan_2021)])
    await WriteService(deps).write(world.writer, [fact("user", "city", "Lisbon", "The user lives in Lisbon", mar_2023)])
    hits = await search(deps, world.writer, "What was my city in 2022?")
    exact = [h.memory.id for h in hits if "exact" in channels(h)]
    assert exact == [berlin.id]
    assert hits[0].memory.id == berlin.id


async def test_a_named_month_finds_what_happened_then(deps, make_tenant):
    world = await make_tenant()
    may = datetime(2023, 5, 12, 15, tzinfo=timezone.utc)
    stored = await WriteService(deps).write(world.writer, [
        event("We shipped the mobile app", may),
        *[event(f"We shipped release {i} of the mobile app", may + timedelta(days=60 * i)) for i in range(1, 6)],
    ])
    hits = await search(deps, world.writer, "What did we ship in May 2023?")
    assert hits[0].memory.id == stored[0].id
    assert [h.memory.id for h in hits if "time" in channels(h)] == [stored[0].id]


async def test_a_chinese_month_finds_what_happened_then(deps, make_tenant):
    world = await make_tenant()
    may = datetime(2023, 5, 12, 15, tzinfo=timezone.utc)
    stored = await WriteService(deps).write(world.writer, [
        event("我们去了杭州旅行", may), event("我们去了苏州旅行", may + timedelta(days=90)),
        event("我们去了南京旅行", may - timedelta(days=90)),
    ])
    hits = await search(deps, world.writer, "2023年5月我们去哪里旅行了？")
    assert hits[0].memory.id == stored[0].id and "time" in channels(hits[0])


async def test_yesterday_is_read_in_the_callers_time_zone(deps, make_tenant):
    world = await make_tenant()
    now = datetime.now(timezone.utc)
    stored = await WriteService(deps).write(world.writer, [
        event("Standup moved to the big room", now - timedelta(days=1)),
        event("Standup moved to the small room", now - timedelta(days=9)),
    ])
    hits = await search(deps, world.writer, "Where did standup move yesterday?", time_zone="UTC")
    assert [h.memory.id for h in hits if "time" in channels(h)] == [stored[0].id]


async def test_a_query_without_a_time_runs_no_time_channel(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, [event("Standup moved", datetime.now(timezone.utc))])
    assert all("time" not in channels(h) for h in await search(deps, world.writer, "where is standup"))


async def test_a_time_range_outside_the_filter_runs_no_time_channel(deps, make_tenant):
    from memplane_server.core.model import MemoryFilter
    world = await make_tenant()
    may = datetime(2023, 5, 12, tzinfo=timezone.utc)
    await WriteService(deps).write(world.writer, [event("We shipped the app", may)])
    hits = await search(deps, world.writer, "what shipped in May 2023",
                        filter=MemoryFilter(occurred_after=datetime(2024, 1, 1, tzinfo=timezone.utc)))
    assert hits == []


async def test_a_transcript_query_also_searches_its_last_turn(deps, make_tenant):
    world = await make_tenant()
    stored = await WriteService(deps).write(world.writer, [
        event("Bart won the 100 metres at the school sports day", datetime(2023, 3, 7, tzinfo=timezone.utc)),
        event("Bart tried mango ice cream at the new shop", datetime(2023, 5, 15, tzinfo=timezone.utc)),
    ])
    transcript = ('<Bart>:"I am doing a magic show at the new year party!"\n<Assistant>:"Wonderful!"\n'
                  '<Bart>:"I am nervous, like before my race at sports day"\n')
    hits = await search(deps, world.writer, transcript)
    assert hits[0].memory.id == stored[0].id
    assert "last_turn" in channels(hits[0])


async def test_a_single_question_runs_no_last_turn_channel(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, [event("Bart won the race", datetime(2023, 3, 7, tzinfo=timezone.utc))])
    assert all("last_turn" not in channels(h) for h in await search(deps, world.writer, "Bart: did he win?"))


async def test_a_word_in_a_few_rows_of_a_small_counted_tenant_still_matches_the_keyword_channel(deps, make_tenant):
    """In 2 of 8 rows a word is past the common share (5%), but a word in so few rows is no speaker's
    name in every turn: with the tenant's statistics counted it still matches."""
    world = await make_tenant()
    now = datetime.now(timezone.utc)
    await noise(deps, world.writer)
    await WriteService(deps).write(world.writer, [event("we camped by Lake Tahoe", now),
                                                  event("Tahoe was cold at night", now)])
    assert await deps.keyword_stats.refresh(world.tenant_id)
    hits = await search(deps, world.writer, "Tahoe")
    assert {h.memory.content for h in hits if "keyword" in channels(h)} == {"we camped by Lake Tahoe",
                                                                          "Tahoe was cold at night"}
