"""Database snapshots for the isolation property test: everything a call could change, read
straight from PostgreSQL (as the owner, past row-level security) and Redis, so what a call
changed can be held against what its caller may change.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from memplane_server.core.access.caller import Caller
from memplane_server.stores.redis.working import WorkingSession

from .isolation_oracle import Mem, Oracle, Violation, can_change, can_read
from .isolation_world import AGENTS, SESSIONS


@dataclass
class Snapshot:
    rows: dict[uuid.UUID, tuple]  # the world's memories, column by column
    history: dict[uuid.UUID, int]  # history entries per memory
    outside: tuple  # every row outside the world (earlier examples, other tests) as one digest
    jobs: dict[uuid.UUID, tuple]  # the world's operations
    working: dict[tuple, tuple]  # (tenant, agent, session) -> working items and state
    sources: dict[uuid.UUID, set[uuid.UUID]]  # derived memory -> what it was derived from (memory_sources)
    policies: dict[str, tuple]  # tenant -> its lifecycle policy row
    decisions: dict[uuid.UUID, tuple]  # reflection decisions and no-result signals: id -> (tenant, agent)


@dataclass(frozen=True)
class Reach:
    """What a tenant-wide call (an admin's erasure of a user, a lifecycle run) may change beyond
    what `can_change` allows the caller: the rows `rows` selects, and the working memory of every
    agent of the caller's tenant when `working`."""

    rows: Callable[[Mem], bool]
    working: bool = True


async def take_snapshot(deps, tenants: list[str]) -> Snapshot:
    async with deps.memories.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT id, tenant_id, scope, domain, agent_id, kind, layer, session_id, user_id, entity,"
            " content, status, confidence, tags, updated_at FROM memories WHERE tenant_id = ANY($1::text[])",
            tenants,
        )
        history = await conn.fetch(
            "SELECT memory_id, count(*) AS n FROM memory_history WHERE tenant_id = ANY($1::text[])"
            " GROUP BY memory_id",
            tenants,
        )
        outside = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM memories WHERE tenant_id <> ALL($1::text[])) AS n,"
            " (SELECT md5(coalesce(string_agg(id::text || status || confidence::text || md5(content)"
            "   || tags::text || updated_at::text, ',' ORDER BY id), ''))"
            "   FROM memories WHERE tenant_id <> ALL($1::text[])) AS digest,"
            " (SELECT count(*) FROM memory_history WHERE tenant_id <> ALL($1::text[])) AS history,"
            " (SELECT md5(coalesce(string_agg(id::text || state || updated_at::text, ',' ORDER BY id), ''))"
            "   FROM jobs WHERE tenant_id <> ALL($1::text[])) AS jobs",
            tenants,
        )
        jobs = await conn.fetch(
            "SELECT id, tenant_id, state, updated_at, type, payload->>'summary_id' AS summary_id,"
            " caller->>'agent_id' AS agent_id FROM jobs"
            " WHERE tenant_id = ANY($1::text[])", tenants
        )
        links = await conn.fetch(
            "SELECT memory_id, source_id FROM memory_sources WHERE tenant_id = ANY($1::text[])", tenants)
        decisions = await conn.fetch(
            "SELECT id, tenant_id, agent_id FROM reflection_decisions WHERE tenant_id = ANY($1::text[])", tenants)
        policies = await conn.fetch(
            "SELECT tenant_id, enabled, policy::text, updated_at FROM lifecycle_policies"
            " WHERE tenant_id = ANY($1::text[])", tenants)
    sessions = [(t, a, s) for t in tenants for a in (None, *AGENTS) for s in SESSIONS]
    async with deps.working.client.pipeline(transaction=False) as pipe:
        for t, a, s in sessions:
            ws = WorkingSession(t, a, s)
            pipe.lrange(ws.key("items"), 0, -1)
            pipe.hgetall(ws.key("state"))
        raw = await pipe.execute()
    return Snapshot(
        rows={r["id"]: tuple(r.values()) for r in rows},
        history={r["memory_id"]: r["n"] for r in history},
        outside=tuple(outside.values()),
        jobs={r["id"]: tuple(r.values()) for r in jobs},
        working={key: (tuple(raw[2 * i]), tuple(sorted(raw[2 * i + 1].items()))) for i, key in enumerate(sessions)},
        sources=_group(links),
        policies={r["tenant_id"]: tuple(r.values()) for r in policies},
        decisions={r["id"]: (r["tenant_id"], r["agent_id"]) for r in decisions},
    )


def _group(links) -> dict[uuid.UUID, set[uuid.UUID]]:
    out: dict[uuid.UUID, set[uuid.UUID]] = {}
    for r in links:
        out.setdefault(r["memory_id"], set()).add(r["source_id"])
    return out


def _follows_its_sources(ident: uuid.UUID, before: Snapshot, after: Snapshot, changed: set[uuid.UUID]) -> bool:
    """A derived memory whose source changed may turn stale or be forgotten or erased with it (the
    triggers of migrations 0009 and 0010, running as the owner, whoever changed the source); its
    content and everything else stay as they were."""
    if not before.sources.get(ident, set()) & changed:
        return False
    old, new = before.rows[ident], after.rows.get(ident)
    return new is None or (new[11] in ("stale", "deleted") and old[:11] == new[:11] and old[12:14] == new[12:14])


def check_unchanged(what: str, caller: Caller, before: Snapshot, after: Snapshot, oracle: Oracle, *,
                    nothing: bool, new: set, reach: Reach | None = None) -> None:
    """Nothing the caller may not change has changed (nothing at all when `nothing`: a failed
    call or a dry run), no row appeared but the `new` ones the call reported, and every memory
    newly derived (memory_sources) was derived from memories the caller can read.

    A tenant-wide call also reaches what its `reach` names. Memories derived from a changed one may
    follow it (turn stale, be forgotten or erased) whoever owns them."""
    names = oracle.names
    changed = {i for i, row in before.rows.items() if after.rows.get(i) != row}
    for ident, row in before.rows.items():
        m = oracle.mems[ident]
        if not nothing and can_change(caller, m):
            continue
        if not nothing and reach and m.tenant == caller.tenant_id and reach.rows(m):
            continue
        if not nothing and _follows_its_sources(ident, before, after, changed):
            continue
        if after.rows.get(ident) != row or after.history.get(ident) != before.history.get(ident):
            why = "a dry run / failed call" if nothing and can_change(caller, m) else (
                "read-only" if can_read(caller, m) else "invisible")
            gone = "erased" if ident not in after.rows else "changed"
            raise Violation(f"{what}: {names.who(caller)} {gone} a {why} {names.describe(m)}:"
                            f" {row} -> {after.rows.get(ident)}")
    for ident in after.rows.keys() - before.rows.keys():
        if nothing or ident not in new:
            raise Violation(f"{what}: a row appeared that the call did not report: {after.rows[ident]}")
    for ident, sources in after.sources.items():
        for source in sources - before.sources.get(ident, set()):
            m = oracle.mems.get(source)
            if m is None or not can_read(caller, m):
                known = names.describe(m) if m else f"{source}, a memory outside this world"
                raise Violation(f"{what}: {names.who(caller)} derived {ident} from {known}")
    for ident, (tenant, agent) in before.decisions.items():
        own = tenant == caller.tenant_id and (agent == caller.agent_id or bool(reach and reach.working))
        if (nothing or not own) and ident not in after.decisions:
            raise Violation(f"{what}: {names.who(caller)} removed a reflection decision of"
                            f" {names.tenant(tenant)} agent {agent}")
    for tenant, policy in after.policies.items():
        if (nothing or tenant != caller.tenant_id) and before.policies.get(tenant) != policy:
            raise Violation(f"{what}: {names.who(caller)} changed the lifecycle policy of {names.tenant(tenant)}")
    for ident, row in before.jobs.items():
        if (nothing or row[1] != caller.tenant_id) and after.jobs.get(ident) != row:
            raise Violation(f"{what}: {names.who(caller)} changed an operation of {names.tenant(row[1])}")
    for key, value in before.working.items():
        own = key[0] == caller.tenant_id and (key[1] == caller.agent_id or bool(reach and reach.working))
        if (nothing or not own) and after.working[key] != value:
            raise Violation(f"{what}: {names.who(caller)} changed working memory of"
                            f" {names.tenant(key[0])}/{key[1]}/{key[2]}")
    if before.outside != after.outside:
        raise Violation(f"{what}: {names.who(caller)} changed rows of tenants outside this world (earlier examples)")
