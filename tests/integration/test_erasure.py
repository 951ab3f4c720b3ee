"""Erasure of a user: one Forget call with erase_user_id removes everything about a
user in the caller's tenant, every layer, scope, table and Redis key, derived memories included,
and returns a receipt whose counts match what the shared scan found before; afterwards the scan
finds nothing of the user (another tenant's user of the same id is another person and stays), and
everything else is unchanged. Through the SDK and the in-process server, so the idempotency cache
holds the responses of every write, as in production."""
from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from memplane import AsyncMemoryClient, MemoryInput
from memplane_server.core.access.caller import Caller, Role, caller_from_json
from memplane_server.core.forget.erasure import subject_of
from memplane_server.core.model import Kind, MemoryDraft
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres.sql import record_from_json
from memplane_server.stores.redis.working import opened_item, opened_state
from memplane_server.stores.sealing import Texts, open_texts
from tests.support.inproc import serving
from tests.support.jobs import run_jobs_until
from tests.support.scan import Hit, describe, rows_by_table, scan
from tests.support.services import erasure_service, job_runner

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def hits_by_tenant(deps, client, hits: list[Hit]) -> dict[str, list[Hit]]:
    """Each hit attributed to the tenant whose row or key it is."""
    out: dict[str, list[Hit]] = {}
    idem: dict[str, str] = {}
    async for ref in client.scan_iter(match="mp:idem-ref:*"):
        for member in await client.smembers(ref):
            _, tenant, record = member.decode().split("|", 2)
            idem[record] = tenant
    for h in hits:
        if h.store == "postgres":
            tenant = await deps.memories.pool.fetchval(
                f'SELECT tenant_id::text FROM "{h.where}" WHERE ctid = $1::text::tid', h.row)
        elif h.where.startswith("mp:wm:{"):
            tenant = h.where.split("{", 1)[1].split("}", 1)[0]
        else:
            tenant = idem.get(h.where, "?")
        out.setdefault(tenant, []).append(h)
    return out


async def snapshot(deps, client, tenant: str, user: str) -> dict:
    """Everything not about the user in that tenant (nor holding their id): memory rows (vectors aside),
    their history, and the working memory of every session not the user's alone."""
    rows = await deps.memories.pool.fetch(
        "SELECT (to_jsonb(m) - 'embedding' - 'context_embedding')::text AS row, m.tenant_id, m.sealed_key,"
        " m.content, m.context, m.value, m.metadata FROM memories m"
        " WHERE NOT (m.tenant_id = $1 AND m.user_id IS NOT DISTINCT FROM $2) ORDER BY m.id", tenant, user)
    history = await deps.memories.pool.fetch(
        "SELECT h.seq, h.snapshot::text FROM memory_history h JOIN memories m ON m.id = h.memory_id"
        " WHERE NOT (m.tenant_id = $1 AND m.user_id IS NOT DISTINCT FROM $2) ORDER BY h.tenant_id, h.seq", tenant, user)
    working = {}
    async for key in client.scan_iter(match="mp:wm:*:items"):
        items = [v for v in await client.lrange(key, 0, -1) if user not in json.dumps(opened_item(json.loads(v)))]
        if not items:
            continue  # a session of the user alone
        session = key[: -len(b"items")]
        working[session + b"items"] = items
        for part in (b"state", b"meta"):
            working[session + part] = {k: v for k, v in (await client.hgetall(session + part)).items()
                                       if user.encode() not in v and user not in _opened_state(v, session)}
    # Rows derived from the user's (a summary stating their fact) hold their text: theirs too. The
    # texts are sealed: what they say is read opened.
    return {"memories": [r["row"] for r in rows if user not in r["row"] and user not in _opened_row(r)],
            "history": [tuple(r) for r in history if user not in r[1] and user not in _opened_snapshot(r[1])],
            "working": {k: v for k, v in working.items() if v}}


def _opened_row(r) -> str:
    return repr(open_texts(r["sealed_key"], r["tenant_id"], Texts(r["content"], r["context"], r["value"],
                                                                     r["metadata"])))


def _opened_snapshot(text: str) -> str:
    record = record_from_json(json.loads(text))
    return repr((record.content, record.context, record.value, record.metadata)) if record else ""


def _opened_state(value: bytes, session: bytes) -> str:
    if not value.startswith(b"\x00"):
        return value.decode(errors="replace")
    tenant = session.decode().split("{", 1)[1].split("}", 1)[0]  # mp:wm:{tenant}:agent:session:
    return opened_state(value.decode(), tenant)


async def populate(served, deps, keys: dict[str, str], domain: str, user: str, other: str) -> dict:
    """The user in every layer, scope and store of the tenant; another user beside them."""
    address = served.address
    s1, s2, s3, s4 = (f"s{n}-{uuid.uuid4().hex[:8]}" for n in range(1, 5))
    made = {}
    async with AsyncMemoryClient(address, keys["writer"]) as writer:
        facts = await writer.write([
            {"content": f"{user} lives in Paris", "kind": "fact", "entity": "user", "attribute": "city",
             "value": f"Paris ({user})", "session_id": s1, "user_id": user},
        ])
        await writer.write([MemoryInput(f"{user} says hi #{n}", kind="turn", session_id=s1, user_id=user)
                            for n in range(3)])
        lesson = await writer.write([MemoryInput(f"For {user}, always confirm by mail", kind="lesson", user_id=user)])
        made["lesson"] = lesson.memories[0].id
        await writer.write([MemoryInput(f"{user} paid by card", kind="event", scope="domain", domain=domain,
                                        user_id=user)])
        reflected = await writer.reflect(session_id=s1, user_id=user)
        made["summary"] = reflected.memories[-1].id
        # A summary of the session not about anyone in particular, stating the user's fact: derived.
        await writer.reflect(session_id=s1)
        queued = await writer.reflect(session_id=s1, user_id=user, mode="async")
        made["reflect_job"] = queued.operation.id
        made["fact"] = facts.memories[0].id
        # A search about the user that found nothing: a reflection signal keeping the query text.
        missed = await writer.search(f"which dentist does {user} see", kinds=["procedure"], user_id=user)
        assert not missed.hits
        await writer.write([MemoryInput(f"{other} lives in Rome", kind="fact", user_id=other, session_id=s4)])
        await writer.write([MemoryInput(f"{other} says hello", kind="turn", user_id=other, session_id=s4)])
    async with AsyncMemoryClient(address, keys["a1"]) as a1:
        await a1.write([MemoryInput(f"{user} prefers tea", kind="preference", user_id=user)])
        await a1.write([
            {"content": f"{user} is choosing a flight", "kind": "turn", "layer": "working", "session_id": s2,
             "user_id": user},
            {"content": f"{user} wants an aisle seat", "kind": "event", "layer": "working", "session_id": s2,
             "user_id": user, "state_key": "seat"},
        ])
        await a1.write([{"content": f"{other} is waiting", "kind": "turn", "layer": "working", "session_id": s4,
                         "user_id": other}])
    async with AsyncMemoryClient(address, keys["a2"]) as a2:
        await a2.write([MemoryInput(f"{user} called support", kind="event", user_id=user)])
        await a2.write([{"content": f"{user} is on hold", "kind": "turn", "layer": "working", "session_id": s3,
                         "user_id": user}])
    return made


async def wait_for_signal(deps, tenant: str, user: str) -> None:
    """The no-result signal is written after the search has answered."""
    for _ in range(100):
        if await deps.memories.pool.fetchval(
                "SELECT count(*) FROM reflection_decisions WHERE tenant_id = $1 AND user_id = $2", tenant, user):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the search that found nothing left no signal")


async def test_erasing_a_user_removes_every_trace_and_the_receipt_counts_what_the_scan_found(deps, runtime):
    redis = runtime.redis_client
    user, other = f"user-{uuid.uuid4().hex[:10]}", f"other-{uuid.uuid4().hex[:10]}"
    domain = f"d-{uuid.uuid4().hex[:8]}"
    async with serving(deps, runtime) as served:
        tenant, keys = await served.tenant(domains={domain: True})
        tenant_b, keys_b = await served.tenant()
        made = await populate(served, deps, keys, domain, user, other)
        # The same user id in another tenant is another person.
        async with AsyncMemoryClient(served.address, keys_b["writer"]) as b:
            await b.write([MemoryInput(f"{user} lives in Oslo", kind="fact", user_id=user)])
        # A forget whose reason names the user: in the history and the audit log.
        writer = Caller(key_id="test-writer", role=Role.WRITER, tenant_id=tenant, agent_id=None)
        await ForgetService(deps).forget(writer, ids=[made["lesson"]], f=None, hard=False, dry_run=False,
                                         reason=f"asked by {user}")
        await deps.memories.pool.execute(  # its turn windows, as the window builder leaves them (turns only:
            # the isolation property test checks every window in the database against its session's turns)
            "UPDATE memories SET context_keywords = keywords, context_of = 'w' WHERE tenant_id = $1 AND kind = 'turn'",
            tenant)

        await wait_for_signal(deps, tenant, user)
        found = await hits_by_tenant(deps, redis, await scan(deps.memories.pool, redis, [user]))
        before = found[tenant]
        assert set(found) == {tenant, tenant_b}, describe(found.get("?", []))
        tables = rows_by_table(before)
        # Ten written or reflected about the user, and the user's long-term summary (its title names them).
        assert tables["memories"] == 11 and tables["jobs"] == 1 and tables["audit_events"] == 1, tables
        others_before = await snapshot(deps, redis, tenant, user)
        b_before = await snapshot(deps, redis, tenant_b, "-")

        async with AsyncMemoryClient(served.address, keys["admin"]) as admin:
            dry = await admin.erase_user(user, dry_run=True)
            erased = await admin.erase_user(user, reason=f"GDPR art. 17, asked by {user}")
        receipt = erased.receipt
        assert receipt is not None and erased.operation is None and not receipt.dry_run
        assert dry.receipt.dry_run and dry.receipt.counts == receipt.counts
        counts = receipt.counts
        # Rows per table holding the user, as the scan found them before.
        assert counts["postgres.memories"] + counts["postgres.derived_memories"] == tables["memories"]
        assert counts["postgres.derived_memories"] == 1  # the session summary without a user
        assert counts["postgres.memory_history"] == tables["memory_history"]
        assert counts["postgres.jobs"] == tables["jobs"]
        assert counts["postgres.audit_events"] == tables["audit_events"]
        assert counts["postgres.reflection_decisions"] == tables["reflection_decisions"] == 1
        assert set(tables) == {"memories", "memory_history", "jobs", "audit_events", "reflection_decisions"}, tables
        # Redis: working items (list elements) and state keys, and cached responses.
        items = [h for h in before if h.store == "redis" and h.where.endswith(":items")]
        state = [h for h in before if h.store == "redis" and h.where.endswith(":state")]
        cached = {h.where for h in before if h.store == "redis" and h.where.startswith("mp:idem:")}
        assert counts["redis.working_items"] == len(items) == 3
        assert counts["redis.working_state_keys"] == len(state) == 1
        assert counts["redis.working_sessions"] == 2  # a1's and a2's sessions held only the user
        assert counts["redis.idempotency"] == len(cached) > 0
        assert receipt.subject == subject_of(tenant, user) and uuid.UUID(receipt.operation_id)

        after = await hits_by_tenant(deps, redis, await scan(deps.memories.pool, redis, [user]))
        assert set(after) == {tenant_b}, describe(after.get(tenant, []) + after.get("?", []))
        assert await snapshot(deps, redis, tenant, user) == others_before
        assert await snapshot(deps, redis, tenant_b, "-") == b_before
        # The receipt is in the audit log, without the user id.
        event = await deps.tenancy.pool.fetchrow(
            "SELECT target, details FROM audit_events WHERE tenant_id = $1 AND action = 'EraseUser'", tenant)
        assert event["target"] == receipt.subject and event["details"]["receipt"]["counts"] == counts
        assert user not in json.dumps(event["details"])
        assert event["details"]["reason"] == "GDPR art. 17, asked by [erased]"


async def test_a_large_erasure_runs_as_an_operation_and_its_receipt_is_polled(deps, runtime):
    redis = runtime.redis_client
    user = f"user-{uuid.uuid4().hex[:10]}"
    async with serving(deps, runtime) as served:
        tenant, keys = await served.tenant()
        async with AsyncMemoryClient(served.address, keys["writer"]) as writer:
            await writer.write([MemoryInput(f"{user} fact {n}", kind="event", user_id=user) for n in range(5)])
            started = await writer.erase_user(user, mode="async")
            assert started.receipt is None and started.operation is not None
            caller = caller_from_json(await deps.jobs.pool.fetchval(
                "SELECT caller FROM jobs WHERE id = $1", uuid.UUID(started.operation.id)))
            await run_jobs_until(job_runner(deps), deps, caller, uuid.UUID(started.operation.id),
                                 lambda op: op.state == "succeeded")
            done = await writer.get_operation(started.operation.id)
        receipt = done.erasure_receipt
        assert receipt is not None and receipt.operation_id == done.id and receipt.counts["postgres.memories"] == 5
        after = await hits_by_tenant(deps, redis, await scan(deps.memories.pool, redis, [user]))
        assert tenant not in after, describe(after.get(tenant, []))


async def test_an_agent_key_erases_only_what_it_may_change(deps, make_tenant):
    world = await make_tenant()
    user = f"user-{uuid.uuid4().hex[:10]}"

    def draft(content: str, scope=None) -> MemoryDraft:
        return MemoryDraft(scope=scope, domain=None, agent_id=None, layer=None, kind=Kind.EVENT, content=content,
                           user_id=user)

    writes = WriteService(deps)
    [global_] = await writes.write(world.writer, [draft("global")])
    [mine] = await writes.write(world.agent1, [draft("a1's")])
    [theirs] = await writes.write(world.agent2, [draft("a2's")])
    done = await erasure_service(deps).erase(world.agent1, user)
    assert done.receipt.counts["postgres.memories"] == 1 and done.ids == [mine.id]
    left = await deps.memories.pool.fetch("SELECT id FROM memories WHERE tenant_id = $1 AND user_id = $2",
                                          world.tenant_id, user)
    assert {r["id"] for r in left} == {global_.id, theirs.id}
    admin = Caller(key_id="admin", role=Role.TENANT_ADMIN, tenant_id=world.tenant_id, agent_id=None)
    assert (await erasure_service(deps).erase(admin, user)).receipt.counts["postgres.memories"] == 2


async def test_a_reader_may_not_erase_and_an_empty_user_id_is_refused(deps, make_tenant):
    from memplane_server.core.errors import Code, MemplaneError

    world = await make_tenant()
    with pytest.raises(MemplaneError) as err:
        await erasure_service(deps).erase(world.reader, "u1")
    assert err.value.code is Code.PERMISSION_DENIED
    with pytest.raises(MemplaneError) as err:
        await erasure_service(deps).erase(world.writer, " ")
    assert err.value.code is Code.INVALID_ARGUMENT and err.value.reason == "USER_ID_REQUIRED"


async def test_the_admin_cli_erases_a_user_and_prints_the_receipt(deps, runtime, capsys):
    import argparse
    import asyncio

    from memplane_server.commands.erase_user import run

    user = f"user-{uuid.uuid4().hex[:10]}"
    async with serving(deps, runtime) as served:
        tenant, keys = await served.tenant()
        async with AsyncMemoryClient(served.address, keys["a1"]) as a1:
            await a1.write([MemoryInput(f"{user} likes jazz", kind="preference", user_id=user)])
        args = argparse.Namespace(user=user, agent=None, mode=None, dry_run=False, reason="", wait=True,
                                  wait_timeout=30.0)
        status = await asyncio.to_thread(run, args, served.address, keys["admin"])
    assert status == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["receipt"]["counts"]["postgres.memories"] == 1
    assert printed["receipt"]["subject"] == subject_of(tenant, user)
