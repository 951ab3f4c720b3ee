"""Encryption at rest on the real stores (the suites' runtime has a KEK): a raw read of PostgreSQL
and Redis shows no memory text in clear (rows, history, working memory, cached responses), every
read path gives the texts back, a domain memory opens for another member tenant, rows stored in
clear stay readable and are sealed by a re-seal, and a rotation of the data key and then of the
KEK under write loses no write, leaves no memory unreadable and no row under the old keys."""
from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import uuid

import pytest

from memplane_server.core.access.requests import RequestKey
from memplane_server.core.model import Kind, Layer, MemoryDraft, MemoryFilter, Scope
from memplane_server.core.reflection.reflection import ReflectInput, Task, TaskStep
from memplane_server.services.access.idempotency import Idempotency
from memplane_server.services.content.keys import TenantKeys
from memplane_server.services.memories import MemoriesService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres.content.keys import TenantKeyStore
from memplane_server.stores.sealing import OPENERS, Keyring, describe, new_kek_line, parse_keks
from tests.support.clear_text import database_text, redis_text
from tests.support.jobs import run_jobs_until
from tests.support.keys import ENCRYPTION_KEYS
from tests.support.services import job_runner, reflect_service

pytestmark = pytest.mark.asyncio(loop_scope="session")


def unique(label: str) -> str:
    return f"{label} {uuid.uuid4().hex[:12]}"


def draft(content: str, **fields) -> MemoryDraft:
    return MemoryDraft(scope=fields.pop("scope", Scope.GLOBAL), domain=fields.pop("domain", None), agent_id=None,
                       layer=fields.pop("layer", None), kind=fields.pop("kind", Kind.FACT), content=content, **fields)


async def test_no_memory_text_is_stored_in_clear_and_every_read_gives_it_back(deps, make_tenant):
    world = await make_tenant()
    content, context, value, note = unique("plum"), unique("orchard"), unique("damson"), unique("picked")
    [stored] = await WriteService(deps).write(world.writer, [draft(
        content, context=context, entity="fruit", attribute="favourite", value=value, metadata={"note": note})])
    [updated] = [await MemoriesService(deps).update(world.writer, str(stored.id), {"metadata": {"note": note}})]

    raw = await database_text(deps.memories.pool)
    assert not any(text in raw for text in (content, context, value, note))
    got = await MemoriesService(deps).get(world.writer, str(stored.id))
    assert (got.content, got.context, got.value, got.metadata) == (content, context, value, {"note": note})
    [hit] = [h for h in await SearchService(deps).search(world.writer, SearchQuery(text=content, top_k=3))
             if h.memory.id == stored.id]
    assert hit.memory.content == content
    entries, _ = await MemoriesService(deps).history(world.writer, memory_id=str(stored.id), entity=None,
                                                      attribute=None, page_size=10, page_token="")
    assert [h.snapshot.content for h in entries] == [content, content] and updated.metadata == {"note": note}


async def test_working_memory_and_cached_responses_are_sealed_in_redis(deps, make_tenant):
    world = await make_tenant()
    content, state = unique("scratch"), unique("draft-state")
    session = f"s-{uuid.uuid4().hex[:8]}"
    item, _ = await WriteService(deps).write(world.agent1, [
        draft(content, scope=Scope.PRIVATE, layer=Layer.WORKING, kind=Kind.TURN, session_id=session),
        draft(state, scope=Scope.PRIVATE, layer=Layer.WORKING, kind=Kind.TURN, session_id=session, state_key="doc"),
    ])
    cached = Idempotency(deps.idempotency, deps.keys)
    request = RequestKey(uuid.uuid4().hex, "fingerprint", world.tenant_id, "Reflect")
    await cached.run_once(request, lambda: _answer(content), lambda r: r)

    assert content not in await redis_text(deps.working.client) and state not in await redis_text(deps.working.client)
    contents = await deps.working.read(_session_of(item, world))
    assert [i.content for i in contents.items] == [state, content] and contents.state == {"doc": state}
    assert await cached.run_once(request, lambda: _answer("not run"), lambda r: r) == content.encode()


async def _answer(text: str) -> bytes:
    return text.encode()


def _session_of(item, world):
    from memplane_server.stores.redis.working import WorkingSession

    return WorkingSession(world.tenant_id, "a1", item.session_id)


async def test_a_domain_memory_opens_for_another_member_tenant(deps, make_tenant):
    domain = f"d-{uuid.uuid4().hex[:8]}"
    a, b = await make_tenant({domain: True}), await make_tenant({domain: False})
    text = unique("shared runbook")
    [shared] = await WriteService(deps).write(a.writer, [draft(text, scope=Scope.DOMAIN, domain=domain)])

    got = await MemoriesService(deps).get(b.reader, str(shared.id))
    assert got.content == text and describe(got.sealed_with).kek_id == "test-1"


async def test_rows_stored_in_clear_stay_readable_and_a_reseal_seals_them(deps, make_tenant):
    world = await make_tenant()
    clear = TenantKeys(deps.keys.store, None)  # a server without a KEK writes in clear
    text = unique("written before encryption")
    plain = WriteService(deps)
    plain.deps = _with_keys(deps, clear)
    [old] = await plain.write(world.writer, [draft(text)])
    assert text in await database_text(deps.memories.pool)

    assert (await MemoriesService(deps).get(world.writer, str(old.id))).content == text
    moved = await deps.keys.reseal(world.tenant_id)

    assert moved == 1 and text not in await database_text(deps.memories.pool)
    assert (await MemoriesService(deps).get(world.writer, str(old.id))).content == text


def _with_keys(deps, keys):
    from dataclasses import replace

    return replace(deps, keys=keys)


async def test_rotating_the_data_key_then_the_kek_under_writes_loses_nothing(deps, make_tenant):
    world = await make_tenant()
    writes = WriteService(deps)
    first = await writes.write(world.writer, [draft(unique("before rotation")) for _ in range(20)])
    old_key = await deps.keys.current(world.tenant_id)
    stop = asyncio.Event()
    during: list = []

    async def keep_writing():
        while not stop.is_set():
            during.extend(await writes.write(world.writer, [draft(unique("during rotation"))]))

    writer = asyncio.create_task(keep_writing())
    await deps.keys.rotate(world.tenant_id)
    await deps.keys.reseal(world.tenant_id)
    new_kek = parse_keks(new_kek_line(f"rot-{uuid.uuid4().hex[:6]}"))[0]
    OPENERS.add([new_kek])
    rotated = TenantKeys(TenantKeyStore(deps.memories.pool), new_kek.id)
    try:
        await rotated.rewrap_all()
        stop.set()
        await writer
        await rotated.reseal(world.tenant_id)  # what was written under the old key meanwhile
        await _check_rotated(deps, world, rotated, new_kek, old_key, first, during)
    finally:
        # Every tenant's keys moved with it: back under the suite's KEK, which the CLI tests give.
        await deps.keys.rewrap_all()


async def _check_rotated(deps, world, rotated, new_kek, old_key, first, during) -> None:
    everything = [*first, *during]
    listed = await deps.memories.list(world.writer, MemoryFilter(), limit=1000, after=None)
    assert {m.id for m in listed} == {m.id for m in everything} and len(during) > 0
    current = await rotated.current(world.tenant_id)
    assert current != old_key and describe(current).kek_id == new_kek.id
    rows = await deps.memories.pool.fetch("SELECT DISTINCT sealed_key FROM memories WHERE tenant_id = $1",
                                          world.tenant_id)
    assert [r["sealed_key"] for r in rows] == [current]
    only_new = Keyring()
    only_new.add([new_kek])
    for row in await deps.memories.pool.fetch(
            "SELECT content, sealed_key FROM memories WHERE tenant_id = $1", world.tenant_id):
        assert only_new.open_text(row["sealed_key"], world.tenant_id, "content", row["content"])
    snapshots = await deps.memories.pool.fetch(
        "SELECT DISTINCT snapshot->>'sealed_key' AS k FROM memory_history WHERE tenant_id = $1", world.tenant_id)
    assert [r["k"] for r in snapshots] == [base64.b64encode(current).decode()]


async def test_the_keys_command_reports_and_rotates_a_tenant(settings, deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, [draft(unique("to rotate"))])
    before = await deps.keys.store.current(world.tenant_id)
    env = {**os.environ, "MEMPLANE_DATABASE_URL": settings.database_url, "MEMPLANE_ENCRYPTION_KEYS": ENCRYPTION_KEYS}

    async def keys(*args: str, environment: dict | None = None) -> subprocess.CompletedProcess:
        return await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "memplane_server.cli", "keys", *args], env=environment or env,
            capture_output=True, text=True, timeout=120)

    rotated = await keys("rotate", "--tenant", world.tenant_id)
    status = await keys("status")
    without = await keys("status", environment={k: v for k, v in env.items() if k != "MEMPLANE_ENCRYPTION_KEYS"})

    assert rotated.returncode == 0, rotated.stderr
    assert json.loads(rotated.stdout) == {world.tenant_id: {"version": before[0] + 1, "resealed": 1}}
    assert json.loads(status.stdout)["active_kek"] == "test-1"
    assert world.tenant_id not in json.loads(status.stdout)["tenants_behind"]
    assert without.returncode == 2 and "encryption is off" in without.stderr


async def test_the_workers_upkeep_reseals_what_a_rotation_left_behind_and_rows_in_clear(deps, make_tenant):
    rotated_world, clear_world = await make_tenant(), await make_tenant()
    tenant = rotated_world.tenant_id
    elsewhere = TenantKeys(deps.keys.store, deps.keys.active_kek, cache_seconds=3600)  # another server
    late = WriteService(_with_keys(deps, elsewhere))
    await late.write(rotated_world.writer, [draft(unique("before the rotation"))])
    await WriteService(_with_keys(deps, TenantKeys(deps.keys.store, None))).write(
        clear_world.writer, [draft(unique("written in clear"))])

    await deps.keys.rotate(tenant)
    await deps.keys.reseal(tenant)
    # The other server still seals under the key it read before the rotation.
    await late.write(rotated_world.writer, [draft(unique("after the rotation, under the old key"))])
    assert tenant in await deps.keys.store.pending_reseal()  # not settled while servers may lag
    await asyncio.sleep(deps.keys.cache_seconds + 0.1)
    await deps.keys.upkeep(first_round=False)
    assert tenant not in await deps.keys.store.pending_reseal()
    assert clear_world.tenant_id in await deps.keys.store.tenants_in_clear()  # a later round leaves them
    await deps.keys.upkeep(first_round=True)

    for world in (rotated_world, clear_world):
        keys = await deps.memories.pool.fetch("SELECT DISTINCT sealed_key FROM memories WHERE tenant_id = $1",
                                              world.tenant_id)
        assert [k["sealed_key"] for k in keys] == [await deps.keys.current(world.tenant_id)]


async def test_a_queued_reflects_task_is_sealed_in_its_job_and_the_job_reflects_on_it(deps, make_tenant):
    world = await make_tenant()
    request, observation = unique("migrate the billing cron"), unique("the cron ran twice")
    task = Task(task_id=unique("t").replace(" ", "-"), request=request,
                steps=(TaskStep(action="moved the cron", observation=observation),), outcome="success")

    operation = await reflect_service(deps).reflect(world.writer, ReflectInput(task=task, user_id="nia", mode="async"))
    raw = await deps.memories.pool.fetchval("SELECT payload::text FROM jobs WHERE id = $1", operation.id)
    view = await run_jobs_until(job_runner(deps), deps, world.writer, operation.id,
                                lambda v: v.state == "succeeded")

    assert request not in raw and observation not in raw and '"user_id": "nia"' in raw
    made = [await MemoriesService(deps).get(world.writer, i) for i in view.result_memory_ids]
    assert made and any(request in m.content for m in made)
