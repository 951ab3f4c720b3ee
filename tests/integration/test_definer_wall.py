"""The database's second wall: every SECURITY DEFINER function, found in the catalog, is revoked
from PUBLIC, granted only to the role that calls it, sets `search_path` with `pg_temp` last, and
those the application role calls act only within the caller's tenant."""
from __future__ import annotations

import uuid

import pytest

from memplane_server.core.model import Kind, MemoryDraft, Scope
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres.session import APP_ROLE, caller_session
from memplane_server.stores.postgres.sql import trace_of

pytestmark = pytest.mark.asyncio(loop_scope="session")

# What the application role calls itself; everything else runs from triggers, as the owner.
CALLED_BY_THE_APP = {
    "mp_keyword_matches(text[],tsquery,boolean,real)", "mp_keyword_matches(text[],tsquery,boolean,real,integer)",
    "mp_entity_links(uuid[],text[],integer)", "mp_derived(uuid[])", "mp_sources_alive(uuid[])",
    "mp_mark_context(text[],text[],boolean)",
}

_DEFINERS = """
SELECT p.oid::regprocedure::text AS name, p.proconfig AS config,
       coalesce((SELECT array_agg(CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                                  ORDER BY 1)
                 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                 WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner), '{}') AS executors
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'public' AND p.prosecdef ORDER BY 1
"""


def violations(rows) -> list[str]:
    found = []
    for r in rows:
        name = r["name"].replace(" ", "")
        expected = [APP_ROLE] if name in CALLED_BY_THE_APP else []
        if list(r["executors"]) != expected:
            found.append(f"{name}: executable by {list(r['executors'])}, expected {expected}")
        if "search_path=public, pg_temp" not in (r["config"] or []):
            found.append(f"{name}: settings {r['config']}")
    return found


async def test_every_security_definer_function_is_walled(deps):
    rows = await deps.memories.pool.fetch(_DEFINERS)
    assert len(rows) >= 15  # the catalog query finds them (triggers, cascades, the search helpers)
    assert CALLED_BY_THE_APP <= {r["name"].replace(" ", "") for r in rows}
    assert violations(rows) == []


async def test_the_catalog_check_fails_when_a_function_is_granted_to_public_again(deps):
    async with deps.memories.pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        try:
            await conn.execute("GRANT EXECUTE ON FUNCTION mp_scrub_jobs(text[], text[]) TO PUBLIC")
            await conn.execute("ALTER FUNCTION mp_derived(uuid[]) SET search_path = public")
            found = violations(await conn.fetch(_DEFINERS))
        finally:
            await tx.rollback()
    assert any(v.startswith("mp_scrub_jobs") and "PUBLIC" in v for v in found), found
    assert any(v.startswith("mp_derived") and "settings" in v for v in found), found


async def test_the_app_role_may_not_run_a_cascade_on_any_tenants_ids(deps, make_tenant):
    import asyncpg

    world = await make_tenant()
    async with caller_session(deps.memories.pool, world.writer) as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("SELECT mp_erase_derived($1::uuid[])", [uuid.uuid4()])


async def _domain_world(deps, make_tenant):
    domain = f"d-{uuid.uuid4().hex[:8]}"
    a, b = await make_tenant({domain: True}), await make_tenant({domain: True})
    [shared] = await WriteService(deps).write(a.writer, [MemoryDraft(
        scope=Scope.DOMAIN, domain=domain, agent_id=None, layer=None, kind=Kind.LESSON, content="shared lesson")])
    [private_b] = await WriteService(deps).write(b.agent1, [MemoryDraft(
        scope=None, domain=None, agent_id=None, layer=None, kind=Kind.EVENT, content="b's secret note")])
    [derived_b] = await WriteService(deps).write(b.writer, [MemoryDraft(
        scope=None, domain=None, agent_id=None, layer=None, kind=Kind.SUMMARY, content="b's summary of it",
        derived_from=(shared.id,))])
    return a, b, shared, private_b, derived_b


async def test_the_app_role_gets_no_other_tenants_content_from_mp_derived(deps, make_tenant):
    a, _, shared, _, derived_b = await _domain_world(deps, make_tenant)
    async with caller_session(deps.memories.pool, a.writer) as conn:
        rows = await conn.fetch("SELECT * FROM mp_derived($1::uuid[])", [shared.id])
    assert [(r["id"], r["content"], r["sealed_key"], r["session_id"], r["user_id"]) for r in rows] == [
        (derived_b.id, None, None, None, None)]
    owner = await deps.memories.pool.fetch("SELECT * FROM mp_derived($1::uuid[])", [shared.id])
    assert [trace_of(r).content for r in owner] == ["b's summary of it"]


async def test_mp_sources_alive_does_not_tell_the_app_role_about_another_tenants_ids(deps, make_tenant):
    a, _, shared, private_b, _ = await _domain_world(deps, make_tenant)
    async with caller_session(deps.memories.pool, a.writer) as conn:
        assert await conn.fetchval("SELECT mp_sources_alive($1::uuid[])", [shared.id]) is True
        assert await conn.fetchval("SELECT mp_sources_alive($1::uuid[])", [private_b.id]) is False


async def test_mp_mark_context_as_the_app_role_leaves_another_tenants_windows_alone(deps, make_tenant):
    a, b = await make_tenant(), await make_tenant()
    [turn] = await WriteService(deps).write(b.writer, [MemoryDraft(
        scope=None, domain=None, agent_id=None, layer=None, kind=Kind.TURN, content="b says hi", session_id="s-b")])
    pool = deps.memories.pool
    await pool.execute("UPDATE memories SET context_of = 'w' WHERE id = $1", turn.id)
    await pool.execute("DELETE FROM context_queue WHERE tenant_id = $1", b.tenant_id)
    async with caller_session(pool, a.writer) as conn:
        await conn.execute("SELECT mp_mark_context($1::text[], $2::text[], true)", [b.tenant_id], ["s-b"])
    assert await pool.fetchval("SELECT context_of FROM memories WHERE id = $1", turn.id) == "w"
    assert await pool.fetchval("SELECT count(*) FROM context_queue WHERE tenant_id = $1", b.tenant_id) == 0
