"""SQL of users' keys (stores/user_keys.py keeps the keys): which key folder the database's rows
name (migration 0036), the locks that keep a write from sealing under a key an erasure is
destroying, the sweep that removes what a restore brought back sealed under destroyed keys, and
the mark of a restore whose sweep is not done yet (migration 0037).

Runs as the owner, with the tenant named in every statement.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg

from ..contexts import WINDOW_KINDS, mark_sessions

# Keys of the two-int advisory locks: this namespace, and a hash of tenant and user.
_LOCK_SPACE = "SELECT {fn}(hashtext('memplane.user_key'), hashtext($1 || '/' || u)) FROM unnest($2::text[]) AS u"


async def lock_users(conn: asyncpg.Connection, tenant_id: str, user_ids: Sequence[str], *, exclusive: bool) -> None:
    """Until the transaction ends: writes sealing under the users' keys (shared) against an erasure
    destroying one (exclusive). Sorted, so two writes never wait on each other in a cycle."""
    users = sorted(set(user_ids))
    if users:
        fn = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
        await conn.execute(_LOCK_SPACE.format(fn=fn), tenant_id, users)


async def recorded_store(conn: asyncpg.Connection | asyncpg.Pool) -> str | None:
    return await conn.fetchval("SELECT store_id FROM user_key_store")


async def record_store(conn: asyncpg.Connection | asyncpg.Pool, store_id: str) -> str:
    """Records the folder's id unless one is recorded; returns the recorded one."""
    await conn.execute("INSERT INTO user_key_store (store_id) VALUES ($1) ON CONFLICT DO NOTHING", store_id)
    return await conn.fetchval("SELECT store_id FROM user_key_store")


async def mark_sweep_pending(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO restore_sweep_pending DEFAULT VALUES ON CONFLICT DO NOTHING")


async def sweep_pending_since(conn: asyncpg.Connection | asyncpg.Pool) -> datetime | None:
    """When the restore whose sweep is not done was made (None: no such restore)."""
    return await conn.fetchval("SELECT restored_at FROM restore_sweep_pending")


async def clear_sweep_pending(conn: asyncpg.Connection) -> None:
    await conn.execute("DELETE FROM restore_sweep_pending")


async def sealed_under_users(conn: asyncpg.Connection) -> list[bytes]:
    """Every user key reference a memory or a search signal is sealed under (one scan: a restore's,
    an operator's)."""
    rows = await conn.fetch("SELECT sealed_key FROM memories WHERE get_byte(sealed_key, 0) = 2 UNION"
                            " SELECT sealed_key FROM reflection_decisions WHERE get_byte(sealed_key, 0) = 2")
    return [r["sealed_key"] for r in rows]


@dataclass
class Swept:
    memories: int = 0
    users: int = 0
    derived: int = 0
    jobs: int = 0
    tenants: list[str] = field(default_factory=list)


async def remove_shredded(conn: asyncpg.Connection, refs: Sequence[bytes]) -> Swept:
    """Removes, as an erasure does, the memories sealed under the given (destroyed) user keys, what
    was derived from them, the session digests holding their words, the jobs naming their users,
    and the search signals sealed under those keys."""
    out = Swept(users=len(refs))
    if not refs:
        return out
    async with conn.transaction():
        rows = await conn.fetch(
            "SELECT tenant_id, id, session_id, user_id, kind FROM memories WHERE sealed_key = ANY ($1::bytea[])",
            list(refs))
        ids = [r["id"] for r in rows]
        out.memories = len(ids)
        out.tenants = sorted({r["tenant_id"] for r in rows})
        out.derived = await conn.fetchval("SELECT count(*) FROM mp_derived($1::uuid[])", ids)
        # The delete trigger erases what was derived and the rows' history and links (0010, 0024).
        await conn.execute("DELETE FROM memories WHERE id = ANY ($1::uuid[])", ids)
        await mark_sessions(conn, [(r["tenant_id"], r["session_id"]) for r in rows if r["kind"] in WINDOW_KINDS],
                            clear=True)
        await conn.execute("DELETE FROM reflection_decisions WHERE sealed_key = ANY ($1::bytea[])", list(refs))
        users = sorted({(r["tenant_id"], r["user_id"]) for r in rows if r["user_id"]})
        out.jobs = await conn.fetchval(
            "WITH gone AS (DELETE FROM jobs j USING unnest($1::text[], $2::text[]) AS u(tenant_id, user_id)"
            " WHERE j.tenant_id = u.tenant_id AND (jsonb_path_exists(j.payload, '$.** ? (@ == $u)',"
            " jsonb_build_object('u', u.user_id)) OR jsonb_path_exists(coalesce(j.result, 'null'::jsonb),"
            " '$.** ? (@ == $u)', jsonb_build_object('u', u.user_id))) RETURNING 1) SELECT count(*) FROM gone",
            [t for t, _ in users], [u for _, u in users])
    return out
