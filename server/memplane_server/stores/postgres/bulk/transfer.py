"""SQL for moving one tenant between deployments: its rows out as JSON, and back in.

Rows travel as to_jsonb(row) and come back through jsonb_populate_record, so every column
(vectors, tsvectors, infinite times included) is read and written by PostgreSQL's own
input and output functions and nothing is lost on the way. Runs as the owner: an operator's
tool, across row-level security.
"""
from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from datetime import datetime, timezone
from itertools import groupby, islice
from typing import Any

import asyncpg

from ....core.transfer import ExportedRow, ExportHeader
from ...sealing import OPENERS, Texts, open_texts, seal
from ..contexts import WINDOW_KINDS, mark_sessions
from ..migrations import applied_version


class UnknownTenant(LookupError):
    """The tenant to export does not exist."""


class ImportConflict(Exception):
    """A row of the import already exists (say, the same file imported twice into one tenant)."""


class ImportRefused(Exception):
    """The file would put memories where the importing tenant may not write."""


_EXPORTS = {
    "tenants": "SELECT to_jsonb(t)::text FROM tenants t WHERE id = $1",
    "agents": "SELECT to_jsonb(a)::text FROM agents a WHERE tenant_id = $1 ORDER BY id",
    # Domains are shared; the ones the tenant's memories live in travel with them (grants do not).
    "domains": "SELECT to_jsonb(d)::text FROM domains d WHERE name IN"
               " (SELECT domain FROM memories WHERE tenant_id = $1 AND domain IS NOT NULL) ORDER BY name",
    "memories": "SELECT to_jsonb(m)::text FROM memories m WHERE tenant_id = $1 ORDER BY id",
    "memory_history": "SELECT to_jsonb(h)::text FROM memory_history h WHERE tenant_id = $1 ORDER BY seq",
}

# The tenant and its agents may exist already in the target (made by an admin first); memories
# and history may not, so a second import of one file fails instead of duplicating. Domains and
# their grants are the platform admin's: a file's domain rows are not imported, and its domain
# memories go only into domains the target tenant is granted read-write (checked after the insert,
# on what was stored, whatever the file's rows claim).
_IMPORTS = {
    "tenants": "WITH t AS (INSERT INTO tenants SELECT r.* FROM jsonb_array_elements($1::jsonb) e,"
               " jsonb_populate_record(NULL::tenants, e) r ON CONFLICT (id) DO NOTHING RETURNING id)"
               " INSERT INTO tenant_usage (tenant_id) SELECT id FROM t ON CONFLICT (tenant_id) DO NOTHING",
    "agents": "INSERT INTO agents SELECT r.* FROM jsonb_array_elements($1::jsonb) e,"
              " jsonb_populate_record(NULL::agents, e) r ON CONFLICT (tenant_id, id) DO NOTHING",
    "memories": "INSERT INTO memories SELECT r.* FROM jsonb_array_elements($1::jsonb) e,"
                " jsonb_populate_record(NULL::memories, e) r",
    "memory_history": "INSERT INTO memory_history SELECT r.* FROM jsonb_array_elements($1::jsonb) e,"
                      " jsonb_populate_record(NULL::memory_history, e) r",
}
_CHUNK = 200


async def export_tenant(conn: asyncpg.Connection, tenant_id: str) -> AsyncIterator[ExportHeader | ExportedRow]:
    """The header, then every row of the tenant, all read in one snapshot (consistent while
    servers write)."""
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        if await conn.fetchval("SELECT 1 FROM tenants WHERE id = $1", tenant_id) is None:
            raise UnknownTenant(tenant_id)
        yield ExportHeader(tenant_id, await applied_version(conn), datetime.now(timezone.utc))
        for table, sql in _EXPORTS.items():
            async for record in conn.cursor(sql, tenant_id):
                yield ExportedRow(table, _opened(table, json.loads(record[0])))


async def import_rows(conn: asyncpg.Connection, tenant_id: str, rows: Iterable[ExportedRow], *,
                      keep_quota: bool = False, active_kek: str | None = None) -> dict[str, int]:
    """Inserts rows already moved to `tenant_id`, all or nothing; returns how many per table. A
    new tenant gets the deployment's default quota unless keep_quota (the file's). With a KEK the
    memories' texts are sealed under the tenant's current data key (made here for a new tenant)."""
    sealed_with: bytes | None = None
    counts = {table: 0 for table in _IMPORTS}
    sessions: set[tuple[str, str | None]] = set()
    try:
        async with conn.transaction():
            for table, group in groupby(rows, key=lambda r: r.table):
                if table == "domains":
                    continue
                if table == "tenants" and not keep_quota:
                    group = (ExportedRow(r.table, {**r.fields, "max_memories": 0}) for r in group)
                if table in _SEALED_TABLES and active_kek is not None:
                    sealed_with = sealed_with or await _data_key(conn, tenant_id, active_kek)
                    group = (ExportedRow(r.table, _sealed(r.table, r.fields, tenant_id, sealed_with)) for r in group)
                for chunk in _chunks(group):
                    await conn.execute(_IMPORTS[table], json.dumps([r.fields for r in chunk], ensure_ascii=False))
                    counts[table] += len(chunk)
                    if table == "memories":
                        sessions.update((tenant_id, r.fields.get("session_id")) for r in chunk
                                        if r.fields.get("kind") in WINDOW_KINDS)
            refused = await conn.fetch(
                "SELECT DISTINCT m.domain FROM memories m WHERE m.tenant_id = $1 AND m.domain IS NOT NULL"
                " AND NOT EXISTS (SELECT 1 FROM domain_grants g WHERE g.tenant_id = $1 AND g.domain = m.domain"
                " AND g.can_write) ORDER BY 1", tenant_id)
            if refused:
                raise ImportRefused([r["domain"] for r in refused])
            # Windows carried over are kept; the worker rebuilds those whose text or model does
            # not match this deployment (their fingerprint says which).
            await mark_sessions(conn, list(sessions), clear=False)
            # History keeps its sequence numbers (its order); new ones must come after them.
            await conn.execute(
                "SELECT setval(s, greatest((SELECT max(seq) FROM memory_history), pg_sequence_last_value(s), 1))"
                " FROM CAST(pg_get_serial_sequence('memory_history', 'seq') AS regclass) AS s"
            )
    except asyncpg.UniqueViolationError as exc:
        raise ImportConflict(exc.detail or str(exc)) from None
    return counts


# An export is portable: texts opened with this deployment's keys, sealed again on import under
# the target tenant's (another tenant id, or another deployment's KEK, would not open them).
_SEALED_TABLES = ("memories", "memory_history")


async def _data_key(conn: asyncpg.Connection, tenant_id: str, active_kek: str) -> bytes:
    """The tenant's current data key, made in this transaction when it has none (a new tenant)."""
    await conn.execute("INSERT INTO tenant_keys (tenant_id, version, wrapped) SELECT $1, 1, $2"
                       " WHERE NOT EXISTS (SELECT 1 FROM tenant_keys WHERE tenant_id = $1)",
                       tenant_id, OPENERS.new_data_key(active_kek, tenant_id, 1))
    return await conn.fetchval(
        "SELECT wrapped FROM tenant_keys WHERE tenant_id = $1 ORDER BY version DESC LIMIT 1", tenant_id)


def _texts_of(d: dict[str, Any]) -> Texts:
    return Texts(d.get("content") or "", d.get("context") or "", d.get("value"), d.get("metadata") or {})


def _with_texts(d: dict[str, Any], texts: Texts, key: Any) -> dict[str, Any]:
    return {**d, "content": texts.content, "context": texts.context, "value": texts.value,
            "metadata": texts.metadata, "sealed_key": key}


def _opened(table: str, fields: dict[str, Any]) -> dict[str, Any]:
    if table == "memories" and fields.get("sealed_key"):
        key = bytes.fromhex(fields["sealed_key"].removeprefix("\\x"))
        return _with_texts(fields, open_texts(key, fields["tenant_id"], _texts_of(fields)), None)
    if table == "memory_history" and isinstance(fields.get("snapshot"), dict) and fields["snapshot"].get("sealed_key"):
        snapshot = fields["snapshot"]
        key = base64.b64decode(snapshot["sealed_key"])
        return {**fields, "snapshot": _with_texts(snapshot, open_texts(key, snapshot["tenant_id"], _texts_of(snapshot)),
                                                  None)}
    return fields


def _sealed(table: str, fields: dict[str, Any], tenant_id: str, key: bytes | None) -> dict[str, Any]:
    if key is None:
        return fields
    if table == "memories":
        return _with_texts(fields, seal(key, tenant_id, _texts_of(fields)), "\\x" + key.hex())
    snapshot = fields.get("snapshot")
    if isinstance(snapshot, dict):
        sealed = _with_texts(snapshot, seal(key, tenant_id, _texts_of(snapshot)), base64.b64encode(key).decode())
        return {**fields, "snapshot": sealed}
    return fields


def _chunks(rows: Iterable[ExportedRow]) -> Iterator[list[ExportedRow]]:
    it = iter(rows)
    while chunk := list(islice(it, _CHUNK)):
        yield chunk
