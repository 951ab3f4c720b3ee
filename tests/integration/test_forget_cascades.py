"""Forgetting a source reaches what was derived from it and every copy: a summary
is rebuilt without it, a fact extracted from a forgotten turn is gone, and the shared scan finds the
forgotten text in no table and no Redis key. Calls go through the SDK and the in-process server, so
the idempotency cache holds the responses of the writes, as it does in production."""
from __future__ import annotations

import asyncio
import json
import re
import uuid
from dataclasses import replace

import pytest

from memplane import AsyncMemoryClient, MemoryInput
from memplane.errors import InvalidArgumentError
from memplane_server.core.access.caller import caller_from_json
from memplane_server.core.model import Kind, MemoryFilter, Status
from memplane_server.llm.chat import ChatModel
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.write.context import ContextService
from tests.support.fake_llm import Reply
from tests.support.inproc import serving
from tests.support.jobs import run_jobs_until
from tests.support.scan import describe, scan
from tests.support.services import job_runner, write_intake

pytestmark = pytest.mark.asyncio(loop_scope="session")


def marker(word: str) -> str:
    return f"{word}-{uuid.uuid4().hex[:12]}"


async def refresh_job_of(deps, summary_id) -> uuid.UUID:
    return await deps.jobs.pool.fetchval(
        "SELECT id FROM jobs WHERE type = 'refresh_summary' AND payload->>'summary_id' = $1", str(summary_id))


async def build_windows(deps, services, tenant_id: str, session_id: str) -> None:
    """Runs the window builder until the session's turns have windows (other tests' sessions may be queued)."""
    builder = ContextService(deps, quiet_seconds=0)
    for _ in range(200):
        if not await deps.memories.pool.fetchval(
                "SELECT count(*) FROM context_queue WHERE tenant_id = $1 AND session_id = $2", tenant_id, session_id):
            return
        await builder.refresh_next()
    raise AssertionError("the session's windows were never built")


async def test_hard_forgetting_a_summarised_fact_rebuilds_the_summary_and_leaves_the_text_nowhere(deps, runtime):
    city, job = marker("Xanadu"), marker("Pilot")
    session = f"s-{uuid.uuid4().hex[:8]}"
    async with serving(deps, runtime) as served:
        tenant, keys = await served.tenant()
        async with AsyncMemoryClient(served.address, keys["writer"]) as client:
            written = await client.write([
                {"content": f"The user lives in {city}", "kind": "fact", "entity": "user", "attribute": "city",
                 "value": city, "session_id": session},
                {"content": f"The user works as {job}", "kind": "fact", "entity": "user", "attribute": "job",
                 "value": job, "session_id": session},
                {"content": f"The user lives in {city}", "kind": "turn", "layer": "working", "session_id": session},
            ])
            fact = written.memories[0]
            queued = await client.reflect(session_id=session, mode="async")  # a job whose result states the city
            writer = caller_from_json(await deps.jobs.pool.fetchval(
                "SELECT caller FROM jobs WHERE id = $1", uuid.UUID(queued.operation.id)))
            await run_jobs_until(job_runner(deps), deps, writer, uuid.UUID(queued.operation.id),
                                 lambda op: op.state == "succeeded")
            reflected = await client.reflect(session_id=session)
            assert city in reflected.summary and job in reflected.summary
            before = await scan(deps.memories.pool, runtime.redis_client, [city])
            assert {h.store for h in before} == {"postgres", "redis"}, describe(before)
            assert "jobs" in {h.where for h in before}, describe(before)

            await client.forget(ids=[fact.id], hard=True)
            summary_id = reflected.memories[-1].id
            assert await deps.memories.pool.fetchval("SELECT count(*) FROM memories WHERE id = $1", uuid.UUID(summary_id)) == 0
            job_id = await refresh_job_of(deps, summary_id)
            # The job runs as the summary's owner; polling it needs a caller of the tenant.
            caller = (await deps.tenancy.pool.fetchrow("SELECT caller FROM jobs WHERE id = $1", job_id))["caller"]
            await run_jobs_until(job_runner(deps), deps, caller_from_json(caller), job_id,
                                 lambda op: op.state == "succeeded")
            summaries = (await client.list_memories(session_id=session, kinds=["summary"])).items
            assert len(summaries) == 1 and job in summaries[0].content and city not in summaries[0].content
            assert (await client.get_working_memory(session)).items == ()
        after = await scan(deps.memories.pool, runtime.redis_client, [city])
        assert not after, describe(after)


def address_reply(place: str) -> Reply:
    def build(body: dict) -> str:
        prompt = body["messages"][1]["content"]
        turn_id = re.findall(r"\[(n\d+)\]", prompt.split("NEW TURNS:")[1])[0]
        return json.dumps({"operations": [{
            "op": "ADD", "kind": "fact", "entity": "user", "attribute": "address", "value": place, "old_value": "",
            "content": f"The user's address is {place}", "confidence": 0.95, "source_turn": turn_id,
            "evidence": re.findall(rf"\[{turn_id}\] (.*)", prompt)[0]}]})
    return Reply(build)


@pytest.fixture
def llm_deps(deps, fake_llm):
    return replace(deps, llm=ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="k", timeout=5))


async def test_hard_forgetting_a_turn_removes_the_fact_extracted_from_it_and_its_text_everywhere(
        llm_deps, fake_llm, runtime):
    deps = llm_deps
    place = marker("Atlantis")
    session = f"s-{uuid.uuid4().hex[:8]}"
    async with serving(deps, runtime) as served:
        tenant, keys = await served.tenant()
        async with AsyncMemoryClient(served.address, keys["writer"]) as client:
            await client.write([MemoryInput("hello there", kind="turn", session_id=session, user_id="u1")])
            fake_llm.script(address_reply(place))
            done = await client.write([MemoryInput(f"my address is {place} street 5", kind="turn",
                                                   session_id=session, user_id="u1")], infer="sync")
            [fact] = done.extracted
            await client.write([MemoryInput("thanks, noted", kind="turn", session_id=session, user_id="u1")])
            await build_windows(deps, served.services, tenant, session)
            links = await deps.memories.pool.fetchval(
                "SELECT count(*) FROM memory_sources WHERE memory_id = $1 AND source_id = $2",
                uuid.UUID(fact.id), uuid.UUID(done.memories[0].id))
            assert links == 1  # the extracted fact records the turn it came from
            before = await scan(deps.memories.pool, runtime.redis_client, [place])
            assert {h.where for h in before} >= {"memories", "memory_history"}, describe(before)

            await client.forget(ids=[done.memories[0].id], hard=True)
            assert await deps.memories.pool.fetchval("SELECT count(*) FROM memories WHERE id = $1", uuid.UUID(fact.id)) == 0
            # The links at both ends went with the rows (the DELETE trigger: no foreign key does it).
            assert await deps.memories.pool.fetchval(
                "SELECT count(*) FROM memory_sources WHERE memory_id = ANY($1::uuid[]) OR source_id = ANY($1::uuid[])",
                [uuid.UUID(fact.id), uuid.UUID(done.memories[0].id)]) == 0
            await build_windows(deps, served.services, tenant, session)  # the neighbours' windows, rebuilt
        after = await scan(deps.memories.pool, runtime.redis_client, [place])
        assert not after, describe(after)


async def test_soft_forgetting_a_turn_soft_forgets_the_fact_extracted_from_it(llm_deps, fake_llm, make_tenant):
    from memplane_server.core.model import MemoryDraft

    world = await make_tenant()
    place = marker("Lemuria")
    fake_llm.script(address_reply(place))
    accepted = await write_intake(llm_deps).accept(
        world.writer, [MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.TURN,
                                   content=f"I moved to {place}", session_id="s")], "sync")
    records, [fact] = accepted.records, accepted.extracted
    await ForgetService(llm_deps).forget(world.writer, ids=[str(records[0].id)], f=None, hard=False, dry_run=False,
                                         reason="")
    [gone] = await llm_deps.memories.list(world.writer, MemoryFilter(entity="user", statuses=tuple(Status)),
                                          limit=5, after=None)
    assert gone.id == fact.id and gone.status is Status.DELETED
    history, _ = await MemoriesService(llm_deps).history(
        world.writer, memory_id=str(fact.id), entity=None, attribute=None, page_size=5, page_token="")
    assert history[0].action == "deleted" and str(records[0].id) in history[0].reason


async def test_a_derived_memory_whose_source_was_forgotten_meanwhile_is_refused(deps, make_tenant):
    from memplane_server.core.errors import MemplaneError
    from memplane_server.core.model import MemoryDraft
    from memplane_server.services.write.service import WriteService

    world = await make_tenant()
    [turn] = await WriteService(deps).write(world.writer, [MemoryDraft(
        scope=None, domain=None, agent_id=None, layer=None, kind=Kind.TURN, content="a turn", session_id="s")])
    await ForgetService(deps).forget(world.writer, ids=[str(turn.id)], f=None, hard=True, dry_run=False, reason="")
    late = MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.FACT, content="late fact",
                       derived_from=(turn.id,))
    with pytest.raises(MemplaneError) as err:
        await WriteService(deps).write(world.writer, [late])
    assert err.value.reason == "SOURCE_FORGOTTEN"


@pytest.mark.parametrize("conditions", [{}, {"include_pending": True}, {"min_confidence": 0.0},
                                        {"statuses": tuple(Status)}])
async def test_a_filter_that_selects_everything_needs_the_everything_flag(deps, make_tenant, conditions):
    from memplane_server.core.errors import Code, MemplaneError
    from memplane_server.core.model import MemoryDraft
    from memplane_server.services.write.service import WriteService

    world = await make_tenant()
    await WriteService(deps).write(world.writer, [MemoryDraft(
        scope=None, domain=None, agent_id=None, layer=None, kind=Kind.EVENT, content="an event")])
    forget = ForgetService(deps)
    with pytest.raises(MemplaneError) as err:
        await forget.forget(world.writer, ids=None, f=MemoryFilter(**conditions), hard=False, dry_run=False, reason="")
    assert err.value.code is Code.INVALID_ARGUMENT and err.value.reason == "FILTER_REQUIRED"
    done = await forget.forget(world.writer, ids=None, f=MemoryFilter(**conditions), hard=False, dry_run=False,
                               reason="", everything=True)
    assert done.count == 1


async def test_the_sdk_refuses_an_empty_filter_and_forgets_everything_when_asked(deps, runtime):
    async with serving(deps, runtime) as served:
        _, keys = await served.tenant()
        async with AsyncMemoryClient(served.address, keys["writer"]) as client:
            await client.write([MemoryInput("one", kind="event"), MemoryInput("two", kind="event")])
            with pytest.raises(InvalidArgumentError):
                await client.forget(include_pending=True)
            assert (await client.forget(everything=True, dry_run=True)).forgotten_count == 2
            assert (await client.forget(everything=True, hard=True)).forgotten_count == 2
            assert (await client.get_stats()).total == 0


async def test_what_a_session_reflection_distilled_goes_with_a_hard_forgotten_turn(llm_deps, fake_llm, make_tenant):
    """A lesson the model drew from a session is derived from all the session held: erasing one of its
    turns erases the lesson and the model's summary, with their history, and queues the summary's rebuild."""
    from memplane_server.core.model import MemoryDraft
    from memplane_server.core.reflection.reflection import ReflectInput
    from memplane_server.services.reflection.reflect import ReflectService
    from memplane_server.services.write.service import WriteService

    world = await make_tenant()
    secret = marker("Avalon")
    writes = WriteService(llm_deps)
    turns = await writes.write(world.writer, [MemoryDraft(
        scope=None, domain=None, agent_id=None, layer=None, kind=Kind.TURN, content=text, session_id="s-r")
        for text in (f"the vault code is {secret}", "ok, deploying now")])
    fake_llm.script(Reply(json.dumps({
        "memories": [{"kind": "lesson", "content": f"Keep {secret} out of logs", "context": "", "confidence": 0.9,
                      "steps": [1, 2]}],
        "summary": f"Deployed; the code {secret} was shared."})))
    outcome = await ReflectService(llm_deps, writes).run(world.writer, ReflectInput(session_id="s-r"))
    lesson, summary = outcome.memories
    links = await llm_deps.memories.pool.fetch(
        "SELECT memory_id, source_id FROM memory_sources WHERE memory_id = ANY($1::uuid[])", [lesson.id, summary.id])
    assert {(r["memory_id"], r["source_id"]) for r in links} == {(m, t.id) for m in (lesson.id, summary.id) for t in turns}
    await ForgetService(llm_deps).forget(world.writer, ids=[str(turns[0].id)], f=None, hard=True, dry_run=False,
                                         reason="")
    left = await llm_deps.memories.pool.fetchval(
        "SELECT count(*) FROM memories WHERE id = ANY($1::uuid[])", [lesson.id, summary.id])
    assert left == 0
    assert await refresh_job_of(llm_deps, summary.id) is not None
    found = await scan(llm_deps.memories.pool, llm_deps.working.client, [secret])
    assert not found, describe(found)


async def test_a_hard_forget_drops_the_tenants_term_counts_which_held_its_words(deps, runtime, make_tenant):
    """In a small tenant every word is a common term (keyword_stats, migration 0013): the counts
    go with a hard delete and are made again without the forgotten text."""
    from memplane_server.core.model import MemoryDraft
    from memplane_server.services.write.service import WriteService

    world = await make_tenant()
    # One keyword token, the word itself: ending in a digit, the stemmer leaves it whole (a
    # random hex ending in "e" or "ed" lost it, and the check below failed one run in ~16).
    word = f"zanzibarq{uuid.uuid4().hex[:8]}7"
    [gone, _] = await WriteService(deps).write(world.writer, [
        MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.EVENT, content=f"Flew to {word}"),
        MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.EVENT, content="Flew home"),
    ])
    assert await deps.keyword_stats.refresh(world.tenant_id)
    assert [h.where for h in await scan(deps.memories.pool, runtime.redis_client, [word])
            if h.where == "keyword_stats"], "the counts held the word"
    await ForgetService(deps).forget(world.writer, ids=[str(gone.id)], f=None, hard=True, dry_run=False, reason="")
    assert not await deps.memories.pool.fetchval("SELECT count(*) FROM keyword_stats WHERE tenant_id = $1",
                                                 world.tenant_id)
    assert await deps.keyword_stats.refresh(world.tenant_id)
    hits = await scan(deps.memories.pool, runtime.redis_client, [word])
    assert not hits, describe(hits)


@pytest.mark.parametrize("hard", [False, True])
async def test_a_forget_by_filter_in_batches_counts_logs_and_audits_as_one(deps, make_tenant, monkeypatch, hard):
    """Batches of 2 over 6 memories, facts derived from turns placed in later batches than some of their
    sources: every memory is forgotten once, counted once, logged once and audited in one entry."""
    from memplane_server.core.model import MemoryDraft
    from memplane_server.services.forget import service as forget_module
    from memplane_server.services.write.service import WriteService

    monkeypatch.setattr(forget_module, "FORGET_BATCH", 2)
    world = await make_tenant()
    user = marker("leaving")

    def draft(content: str, kind: Kind, **kw) -> MemoryDraft:
        return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=kind, content=content,
                           user_id=user, **kw)

    write = WriteService(deps)
    turns = await write.write(world.writer, [draft(marker("turn"), Kind.TURN, session_id="s") for _ in range(3)])
    await write.write(world.writer, [draft(marker("fact"), Kind.FACT, derived_from=(t.id,)) for t in turns])
    [kept] = await write.write(world.writer, [MemoryDraft(scope=None, domain=None, agent_id=None, layer=None,
                                                          kind=Kind.EVENT, content=marker("kept"), user_id="other")])
    forget = ForgetService(deps)
    f = MemoryFilter(user_id=user)
    planned = await forget.forget(world.writer, ids=None, f=f, hard=hard, dry_run=True, reason="")
    done = await forget.forget(world.writer, ids=None, f=f, hard=hard, dry_run=False, reason="batched")
    assert planned.count == done.count == 6 and len(set(done.ids)) == 6
    pool = deps.memories.pool
    left = await pool.fetch("SELECT id, status FROM memories WHERE tenant_id = $1", world.tenant_id)
    expected = {kept.id: "active"} if hard else {kept.id: "active", **{i: "deleted" for i in done.ids}}
    assert {r["id"]: r["status"] for r in left} == expected
    audits = await pool.fetch("SELECT target FROM audit_events WHERE tenant_id = $1 AND action = 'Forget'",
                              world.tenant_id)
    assert [a["target"] for a in audits] == ["6 memories"]
    changes = await pool.fetch(
        "SELECT memory_id, position FROM memory_changes WHERE tenant_id = $1 AND change = $2 ORDER BY id",
        world.tenant_id, "erased" if hard else "forgotten")
    assert sorted(c["memory_id"] for c in changes) == sorted(done.ids)
    positions = [c["position"] for c in changes]
    assert None not in positions and positions == sorted(positions)


async def test_a_forget_by_filter_in_batches_drops_the_working_copies_of_every_batch(deps, runtime, monkeypatch):
    """Batches of one session each: the working items holding the text of the first batch's memory
    and of the last one's are gone when the call returns (each batch's copies are dropped while the
    next batch runs, the last batch's before the call returns)."""
    from memplane_server.services.forget import service as forget_module

    monkeypatch.setattr(forget_module, "FORGET_BATCH", 1)
    drop_copies = forget_module.drop_copies

    async def slow_drop_copies(*args):
        # Slower than the calls below: a drop still running when the Forget returns would be seen.
        await asyncio.sleep(0.5)
        return await drop_copies(*args)
    monkeypatch.setattr(forget_module, "drop_copies", slow_drop_copies)
    user = marker("leaving")
    texts = {f"s-{uuid.uuid4().hex[:8]}": marker("The user said") for _ in range(3)}
    async with serving(deps, runtime) as served:
        _, keys = await served.tenant()
        async with AsyncMemoryClient(served.address, keys["writer"]) as client:
            for session, text in texts.items():
                await client.write([
                    {"content": text, "kind": "turn", "session_id": session, "user_id": user},
                    {"content": text, "kind": "turn", "layer": "working", "session_id": session},
                ])
                assert len((await client.get_working_memory(session)).items) == 1
            done = await client.forget(user_id=user, hard=True)
            assert done.forgotten_count == 3
            for session in texts:
                assert (await client.get_working_memory(session)).items == ()
    hits = await scan(deps.memories.pool, runtime.redis_client, list(texts.values()))
    assert not hits, describe(hits)


async def test_what_was_derived_is_found_through_every_level_and_the_sources_are_left_out(deps, make_tenant):
    """mp_derived (0024) walks the links level by level: a summary of a lesson drawn from a turn is
    reached from the turn, and a source that is itself derived is not listed among what it reached."""
    from memplane_server.core.model import MemoryDraft
    from memplane_server.services.write.service import WriteService

    world = await make_tenant()
    writes = WriteService(deps)

    async def one(kind: Kind, content: str, *sources) -> uuid.UUID:
        [m] = await writes.write(world.writer, [MemoryDraft(
            scope=None, domain=None, agent_id=None, layer=None, kind=kind, content=content,
            derived_from=tuple(sources))])
        return m.id

    turn = await one(Kind.TURN, marker("turn"))
    lesson = await one(Kind.LESSON, marker("lesson"), turn)
    summary = await one(Kind.SUMMARY, marker("summary"), lesson)
    pool = deps.memories.pool

    async def derived(*ids) -> set[uuid.UUID]:
        return {r["id"] for r in await pool.fetch("SELECT id FROM mp_derived($1::uuid[])", list(ids))}

    assert await derived(turn) == {lesson, summary}
    assert await derived(turn, lesson) == {summary}
    assert await derived(summary) == set()
