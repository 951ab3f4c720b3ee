"""Structured facts with history, re-observation, and the merge of repeats (under concurrency too)."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest

from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Status
from memplane_server.core.write.outcomes import Outcome
from memplane_server.services.memories import MemoriesService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService

pytestmark = pytest.mark.asyncio(loop_scope="session")


def fact(content: str, **kw) -> MemoryDraft:
    return MemoryDraft(**{**dict(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.FACT,
                                 content=content), **kw})


def address(value: str, source: str) -> MemoryDraft:
    return fact(f"The user's address is {value}", entity="user", attribute="address", value=value,
                source_type="turn", source_id=source)


async def active(deps, caller, **filters) -> list:
    records, _ = await MemoriesService(deps).list(caller, MemoryFilter(**filters), 100, "")
    return records


async def test_address_changes_keep_their_history_and_answer_as_of(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps)
    [beijing] = await write.write(world.writer, [address("Beijing Chaoyang", "t1")])
    [shenzhen] = await write.write(world.writer, [address("Shenzhen Nanshan", "t2")])
    between = datetime.now(timezone.utc)
    await asyncio.sleep(0.01)
    [shanghai] = await write.write(world.writer, [address("Shanghai", "t3")])

    [current] = await active(deps, world.writer, entity="user", attribute="address")
    assert current.value == "Shanghai" and current.supersedes == shenzhen.id
    history, _ = await MemoriesService(deps).history(world.writer, memory_id=None, entity="user", attribute="address",
                                                    page_size=50, page_token="")
    created = [(e.snapshot.value, e.changed_at) for e in history if e.action == "created"]
    assert [v for v, _ in created] == ["Shanghai", "Shenzhen Nanshan", "Beijing Chaoyang"]
    assert created[0][1] > created[1][1] > created[2][1]
    old = {e.snapshot.value: e.snapshot for e in history if e.action == "superseded"}
    assert old["Beijing Chaoyang"].valid_to == shenzhen.valid_from
    assert old["Shenzhen Nanshan"].valid_to == shanghai.valid_from

    then = await SearchService(deps).search(
        world.writer, SearchQuery("where does the user live", filter=MemoryFilter(entity="user"), as_of=between))
    assert [h.memory.value for h in then] == ["Shenzhen Nanshan"]
    assert beijing.id not in {h.memory.id for h in then}


async def test_reobserving_a_fact_raises_confidence_and_keeps_one_row(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps)
    [first] = await write.write(world.writer, [fact("Likes jazz", entity="user", attribute="music", value="jazz",
                                                    confidence=0.5, source_type="turn", source_id="a")])
    assert first.status is Status.PENDING
    [again] = await write.write(world.writer, [fact("Likes jazz", entity="user", attribute="music", value="Jazz ",
                                                    confidence=0.5, source_type="turn", source_id="b")])
    assert again.id == first.id
    assert again.confidence == pytest.approx(0.75) and again.status is Status.ACTIVE
    assert again.sources == [{"type": "turn", "id": "a"}, {"type": "turn", "id": "b"}]


async def test_an_elaboration_is_kept_beside_the_memory_it_extends(deps, make_tenant):
    """"first" adds a condition: merging either way would change what one of the two says."""
    world = await make_tenant()
    write = WriteService(deps)
    [old] = await write.write(world.writer, [fact("Deploys to production need a change ticket", kind=Kind.LESSON)])
    [new] = await write.write(world.writer, [fact("Deploys to production need a change ticket first",
                                                  kind=Kind.LESSON)])
    assert new.id != old.id and new.supersedes is None
    assert (await MemoriesService(deps).get(world.writer, str(old.id))).status is Status.ACTIVE


@pytest.mark.parametrize("first, second", [
    ("Bob's dog is named Rex", "Bob's cat is named Rex"),
    ("用户喜欢喝茶", "用户喜欢喝咖啡"),
])
async def test_different_statements_that_embed_alike_are_both_kept(deps, make_tenant, first, second):
    vectors = await deps.embedder.embed_passages([first, second])
    assert float(vectors[0] @ vectors[1]) >= deps.settings.dedup_threshold  # else this test shows nothing
    world = await make_tenant()
    write = WriteService(deps)
    [one] = await write.write(world.writer, [fact(first)])
    [two] = await write.write(world.writer, [fact(second)])
    assert two.id != one.id and two.supersedes is None
    assert {m.content for m in await active(deps, world.writer, kinds=(Kind.FACT,))} == {first, second}


async def test_a_repeat_reobserves_the_memory_and_the_answer_says_it_was_merged(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps)
    [first] = await write.write(world.writer, [fact("The user likes green tea", confidence=0.6)])
    [(again, outcome)] = await write.write_items(world.writer, [fact("the user likes green tea.", confidence=0.6)])
    assert again.id == first.id and again.content == "The user likes green tea"
    assert again.confidence > first.confidence
    assert outcome.outcome is Outcome.MERGED and outcome.related_id == str(first.id)
    assert "case" in outcome.reason and str(first.id) in outcome.reason
    assert [m.id for m in await active(deps, world.writer, kinds=(Kind.FACT,))] == [first.id]


async def test_a_restatement_in_other_words_is_kept_as_a_memory_of_its_own(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps)
    [first] = await write.write(world.writer, [fact("The user likes green tea")])
    [(other, outcome)] = await write.write_items(world.writer, [fact("User likes green tea")])
    assert other.id != first.id and outcome.outcome is Outcome.CREATED


async def test_the_same_statement_about_another_user_is_not_merged(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps)
    [mine] = await write.write(world.writer, [fact("Likes green tea", user_id="u-1")])
    [theirs] = await write.write(world.writer, [fact("Likes green tea", user_id="u-2")])
    assert theirs.id != mine.id and theirs.user_id == "u-2"


async def test_a_new_value_is_answered_as_superseding_the_old_one(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps)
    [(old, created)] = await write.write_items(world.writer, [address("Berlin", "t1")])
    [(new, superseded)] = await write.write_items(world.writer, [address("Paris", "t2")])
    assert created.outcome is Outcome.CREATED
    assert superseded.outcome is Outcome.SUPERSEDED and superseded.related_id == str(old.id)
    assert new.supersedes == old.id


async def test_the_same_value_said_differently_is_a_new_version_not_a_merge(deps, make_tenant):
    """"moved from Berlin" with the value Berlin is not what "lives in Berlin" said: the new text is kept."""
    world = await make_tenant()
    write = WriteService(deps)
    [old] = await write.write(world.writer, [fact("The user lives in Berlin", entity="user", attribute="city",
                                                  value="Berlin")])
    [(new, outcome)] = await write.write_items(world.writer, [fact("The user moved from Berlin", entity="user",
                                                                   attribute="city", value="Berlin")])
    assert new.id != old.id and new.content == "The user moved from Berlin"
    assert outcome.outcome is Outcome.SUPERSEDED


async def test_different_scopes_do_not_merge(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps)
    [mine] = await write.write(world.agent1, [fact("Prefers dark mode", kind=Kind.PREFERENCE)])
    [theirs] = await write.write(world.agent2, [fact("Prefers dark mode", kind=Kind.PREFERENCE)])
    assert mine.id != theirs.id and theirs.supersedes is None


async def test_fifty_concurrent_identical_writes_leave_one_memory(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps)
    results = await asyncio.gather(*(write.write(world.writer, [fact("The VPN endpoint is vpn.example.org",
                                                                     source_type="req", source_id=str(i))])
                                     for i in range(50)))
    assert len({r[0].id for r in results}) == 1
    rows = await deps.tenancy.pool.fetch("SELECT status, confidence, sources FROM memories WHERE tenant_id = $1",
                                         world.tenant_id)
    assert len(rows) == 1 and len(rows[0]["sources"]) == 50


async def test_concurrent_new_values_leave_exactly_one_current(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps)
    await asyncio.gather(*(write.write(world.writer, [address(f"Street {i}", str(i))]) for i in range(10)))
    current = await active(deps, world.writer, entity="user", attribute="address")
    assert len(current) == 1
    total = await deps.tenancy.pool.fetchval("SELECT count(*) FROM memories WHERE tenant_id = $1", world.tenant_id)
    assert total == 10


async def test_duplicates_within_one_batch_collapse(deps, make_tenant):
    world = await make_tenant()
    records = await WriteService(deps).write(world.writer, [fact("Office closes at 6pm"), fact("office closes at 6pm.")])
    assert records[0].id == records[1].id


async def test_a_value_for_one_user_does_not_supersede_another_users(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps)
    [first] = await write.write(world.writer, [fact("Lives in Berlin", entity="user", attribute="city",
                                                    value="Berlin", user_id="u-1")])
    [(second, outcome)] = await write.write_items(world.writer, [fact("Lives in Berlin", entity="user", attribute="city",
                                                                      value="Berlin", user_id="u-2")])
    assert second.id != first.id and outcome.outcome is Outcome.CREATED
    current = await active(deps, world.writer, entity="user", attribute="city")
    assert {m.user_id for m in current} == {"u-1", "u-2"}
