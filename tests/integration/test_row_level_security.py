"""Row-level security alone keeps tenants apart: the application's visibility predicate is
replaced by TRUE and every cross-tenant read and write must still fail."""
from __future__ import annotations

import uuid
from contextlib import asynccontextmanager

import asyncpg
import pytest

from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Scope, Status
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres import memories as memories_module

pytestmark = pytest.mark.asyncio(loop_scope="session")


def draft(content: str, **kw) -> MemoryDraft:
    return MemoryDraft(**{**dict(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.FACT,
                                 content=content, entity="vault"), **kw})


@pytest.fixture
def without_app_predicate(monkeypatch):
    monkeypatch.setattr(memories_module, "visibility", lambda caller, p: "TRUE")
    monkeypatch.setattr(memories_module, "writable", lambda caller, p: "TRUE")


@pytest.fixture
async def seeded(deps, make_tenant):
    domain = f"d-{uuid.uuid4().hex[:8]}"
    a = await make_tenant({domain: True})
    b = await make_tenant({domain: False})
    c = await make_tenant()
    write = WriteService(deps)
    rows = {
        "global": (await write.write(a.writer, [draft("A global secret", scope=Scope.GLOBAL)]))[0],
        "private": (await write.write(a.agent1, [draft("A1 private secret", scope=Scope.PRIVATE)]))[0],
        "domain": (await write.write(a.writer, [draft("A domain secret", scope=Scope.DOMAIN, domain=domain)]))[0],
    }
    return a, b, c, rows, domain


async def test_rls_alone_blocks_cross_tenant_reads(deps, seeded, without_app_predicate):
    a, b, c, rows, _ = seeded
    store = deps.memories
    vector = (await deps.embedder.embed_passages(["secret"]))[0]
    for caller, allowed in [(c.writer, set()), (b.writer, {rows["domain"].id}), (a.agent2, {rows["global"].id, rows["domain"].id})]:
        listed = {m.id for m in await store.list(caller, MemoryFilter(entity="vault"), limit=100, after=None)}
        found = {s.record.id for s in await store.vector_search(caller, MemoryFilter(entity="vault"), vector,
                                                                  limit=100, as_of=None)}
        assert listed == allowed and found == allowed
        for key, row in rows.items():
            got = await store.get(caller, row.id)
            assert (got is not None) == (row.id in allowed), key
        stats = await store.stats(caller, MemoryFilter(entity="vault", statuses=tuple(Status)))
        assert stats.total == len(allowed)


async def test_rls_alone_blocks_cross_tenant_writes(deps, seeded, without_app_predicate):
    a, b, c, rows, domain = seeded
    store = deps.memories
    for caller in (c.writer, b.writer, a.agent2):
        # a.agent2 is of A, which may change A's global and (read-write grant) the domain memory.
        targets = [rows["private"]] if caller is a.agent2 else list(rows.values())
        for row in targets:
            assert await store.update(caller, row.id, {"content": "hijacked"}, embedding=None, keywords=None,
                                      action="updated", actor="evil") is None
        assert await store.supersede(caller, [r.id for r in targets], action="merged", actor="evil", reason="") == []
        count, _ = await store.forget(caller, ids=[r.id for r in targets], f=None, hard=True, dry_run=False,
                                      actor="evil", reason="")
        assert count == 0
    for row in rows.values():
        still = await store.get(a.agent1, row.id)
        assert still is not None and still.content != "hijacked"


async def test_rls_refuses_inserting_into_another_tenant(deps, seeded):
    a, b, c, rows, domain = seeded
    async with deps.memories.session(c.writer) as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(
                "INSERT INTO memories (tenant_id, id, scope, layer, kind, content, confidence, status, occurred_at)"
                " VALUES ($1, $2, 'global', 'semantic', 'fact', 'forged', 1, 'active', now())",
                a.tenant_id, uuid.uuid4(),
            )


async def test_rls_refuses_writing_a_domain_without_a_write_grant(deps, seeded):
    a, b, c, rows, domain = seeded
    async with deps.memories.session(b.writer) as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(
                "INSERT INTO memories (tenant_id, id, scope, domain, layer, kind, content, confidence, status,"
                " occurred_at) VALUES ($1, $2, 'domain', $3, 'semantic', 'fact', 'x', 1, 'active', now())",
                b.tenant_id, uuid.uuid4(), domain,
            )


async def test_without_rls_the_same_checks_would_leak(deps, seeded, without_app_predicate, monkeypatch):
    """The control: with the restricted role switched off, the predicate-less store leaks, so the
    tests above pass because of row-level security and nothing else."""
    a, b, c, rows, _ = seeded
    pool = deps.memories.pool

    @asynccontextmanager
    async def unrestricted(_pool, caller, **_settings):
        async with pool.acquire() as conn, conn.transaction():
            yield conn

    monkeypatch.setattr(memories_module, "caller_session", unrestricted)
    assert await deps.memories.get(c.writer, rows["private"].id) is not None


async def test_keyword_search_needs_no_app_predicate_either(deps, seeded, without_app_predicate):
    """The keyword channels match inside mp_keyword_matches (SECURITY DEFINER, so the policy does
    not apply there): it must keep tenants, agents and domains apart by itself, and the policy
    still applies to the rows read back."""
    a, b, c, rows, _ = seeded
    for caller, allowed in [(c.writer, set()), (b.writer, {rows["domain"].id}),
                            (a.agent2, {rows["global"].id, rows["domain"].id}), (a.agent1, {r.id for r in rows.values()})]:
        found = {s.record.id for s in await deps.memories.keyword_search(
            caller, MemoryFilter(entity="vault"), ["secret"], pool=100, as_of=None, limit=100)}
        assert found == allowed


# The four-argument form is 0013's, kept for servers of the previous release (migration 0027).
@pytest.mark.parametrize("call", ["mp_keyword_matches($1::text[], '', false, 1, 1000)",
                                  "mp_keyword_matches($1::text[], '', false, 1)"])
async def test_the_keyword_function_alone_does_not_cross_tenants_agents_or_domains(deps, seeded, call):
    a, b, c, rows, domain = seeded

    async def matches(caller, terms: list[str]) -> set[uuid.UUID]:
        async with deps.memories.session(caller) as conn:
            found = await conn.fetch(f"SELECT id FROM {call}", terms)
        return {r["id"] for r in found}

    assert await matches(c.writer, ["secret"]) == set()
    assert await matches(b.writer, ["secret"]) == {rows["domain"].id}
    assert await matches(a.agent2, ["secret", "private", "a1"]) == {rows["global"].id, rows["domain"].id}
    assert await matches(a.agent1, ["secret"]) == {r.id for r in rows.values()}
    # It reads the caller from the transaction's settings, never from its arguments: terms naming
    # another tenant's or domain's partition (the index keys are '<lexeme> t:<tenant>' and
    # '<lexeme> d:<domain>') find nothing.
    forged = [f"secret t:{a.tenant_id}", f"secret d:{domain}", f"secret t:{a.tenant_id} t:{c.tenant_id}"]
    assert await matches(c.writer, forged) == set()
    # No caller in the transaction: nothing at all.
    async with deps.memories.pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL ROLE memplane_app")
        assert await conn.fetch(f"SELECT id FROM {call}", ["secret"]) == []
        # The statistics it reads are not the caller's to read.
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.fetch("SELECT * FROM keyword_stats")


async def _refused_to_the_app_role(deps, sql: str, *args) -> None:
    async with deps.memories.pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL ROLE memplane_app")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(sql, *args)


async def test_the_change_logs_commit_markers_are_no_callers_to_read_or_write(deps, seeded):
    # Migration 0019's memory_change_commits holds transaction ids only, written by the triggers as the owner.
    await _refused_to_the_app_role(deps, "SELECT * FROM memory_change_commits")
    await _refused_to_the_app_role(deps, "INSERT INTO memory_change_commits VALUES (pg_current_xact_id())")


async def test_the_change_logs_pending_entries_are_no_callers_to_read_or_write(deps, seeded):
    # Migration 0028's memory_change_pending holds every tenant's entries until their commit: a caller
    # reading it would see other tenants' changes, writing it would forge them.
    await _refused_to_the_app_role(deps, "SELECT * FROM memory_change_pending")
    await _refused_to_the_app_role(
        deps, "INSERT INTO memory_change_pending (tenant_id, memory_id, change, action, scope, kind)"
              " VALUES ($1, gen_random_uuid(), 'created', 'created', 'global', 'fact')", seeded[0].tenant_id)
