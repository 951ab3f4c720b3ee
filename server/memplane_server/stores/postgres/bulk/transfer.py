"""SQL for moving one tenant between deployments: its rows out as JSON, and back in.

Rows travel as to_jsonb(row) and come back through jsonb_populate_record, so every column
(vectors, tsvectors, infinite times included) is read and written by PostgreSQL's own
input and output functions and nothing is lost on the way. Runs as the owner: an operator's
tool, across row-level security.

Memories about a user sealed under the user's key stay sealed in an export (unless asked to open
them), naming the tenant they were sealed in: an import opens them with this deployment's users'
keys, so an export made before a user's erasure cannot bring that user back. Such rows whose key
was destroyed are left out of the import and counted as erased.
"""
from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from datetime import datetime, timezone
from itertools import groupby, islice
from typing import Any

import asyncpg

from ....core.transfer import SEALED_TENANT, ExportedRow, ExportHeader
from ...sealing import OPENERS, Shredded, Texts, is_user_key_ref, key_from_json, open_sealed_texts, open_texts, seal
from ...user_keys import UserKeyFiles
from ..content.user_keys import recorded_store
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


async def export_tenant(conn: asyncpg.Connection, tenant_id: str, *,
                        open_users: bool = False) -> AsyncIterator[ExportHeader | ExportedRow]:
    """The header, then every row of the tenant, all read in one snapshot (consistent while
    servers write). open_users: memories about users opened too (the file then holds them)."""
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        if await conn.fetchval("SELECT 1 FROM tenants WHERE id = $1", tenant_id) is None:
            raise UnknownTenant(tenant_id)
        store = None if open_users else await recorded_store(conn)
        yield ExportHeader(tenant_id, await applied_version(conn), datetime.now(timezone.utc), store)
        for table, sql in _EXPORTS.items():
            async for record in conn.cursor(sql, tenant_id):
                yield ExportedRow(table, _opened(table, json.loads(record[0]), open_users))


async def import_rows(conn: asyncpg.Connection, tenant_id: str, rows: Iterable[ExportedRow], *,
                      keep_quota: bool = False, active_kek: str | None = None,
                      users: UserKeyFiles | None = None) -> dict[str, int]:
    """Inserts rows already moved to `tenant_id`, all or nothing; returns how many per table (and
    how many memories were left out as erased). A new tenant gets the deployment's default quota
    unless keep_quota (the file's). With a KEK the memories' texts are sealed under the tenant's
    current data key (made here for a new tenant), or its user's key where users' keys are kept."""
    sealed_with: bytes | None = None
    counts = {table: 0 for table in _IMPORTS}
    erased = _Erased()
    sessions: set[tuple[str, str | None]] = set()
    try:
        async with conn.transaction():
            for table, group in groupby(rows, key=lambda r: r.table):
                if table == "domains":
                    continue
                if table == "tenants" and not keep_quota:
                    group = (ExportedRow(r.table, {**r.fields, "max_memories": 0}) for r in group)
                if table in _SEALED_TABLES:
                    group = erased.left_out(group)
                if table in _SEALED_TABLES and active_kek is not None:
                    sealed_with = sealed_with or await _data_key(conn, tenant_id, active_kek)
                    group = (ExportedRow(r.table, _sealed(r.table, r.fields, tenant_id, sealed_with, users))
                             for r in group)
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
    return {**counts, "erased_memories": len(erased.memory_ids), "erased_history": erased.history}


class _Erased:
    """Opens the rows an export kept sealed under users' keys; those whose key was destroyed (the
    user erased since) are left out, with their history."""

    def __init__(self) -> None:
        self.memory_ids: set[str] = set()
        self.history = 0

    def left_out(self, rows: Iterable[ExportedRow]) -> Iterator[ExportedRow]:
        for row in rows:  # memories come first, then their history
            if row.table == "memory_history" and row.fields.get("memory_id") in self.memory_ids:
                self.history += 1
                continue
            try:
                yield _opened_for_import(row)
            except Shredded:
                if row.table == "memories":
                    self.memory_ids.add(row.fields["id"])
                else:
                    self.history += 1


def _opened_for_import(row: ExportedRow) -> ExportedRow:
    fields = dict(row.fields)
    sealed_in = fields.pop(SEALED_TENANT, None)
    if sealed_in is None:
        return ExportedRow(row.table, fields)
    if row.table == "memories":
        key = key_from_json(fields.get("sealed_key"))
        assert key is not None
        return ExportedRow(row.table, _with_texts(fields, open_sealed_texts(key, sealed_in, _texts_of(fields)), None))
    snapshot = fields["snapshot"]
    key = key_from_json(snapshot.get("sealed_key"))
    assert key is not None
    opened = _with_texts(snapshot, open_sealed_texts(key, sealed_in, _texts_of(snapshot)), None)
    return ExportedRow(row.table, {**fields, "snapshot": opened})


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


def _opened(table: str, fields: dict[str, Any], open_users: bool) -> dict[str, Any]:
    if table == "memories" and fields.get("sealed_key"):
        key = bytes.fromhex(fields["sealed_key"].removeprefix("\\x"))
        if is_user_key_ref(key) and not open_users:
            return {**fields, SEALED_TENANT: fields["tenant_id"]}
        return _with_texts(fields, open_texts(key, fields["tenant_id"], _texts_of(fields)), None)
    if table == "memory_history" and isinstance(fields.get("snapshot"), dict) and fields["snapshot"].get("sealed_key"):
        snapshot = fields["snapshot"]
        key = key_from_json(snapshot["sealed_key"])
        if is_user_key_ref(key) and not open_users:
            return {**fields, SEALED_TENANT: snapshot["tenant_id"]}
        return {**fields, "snapshot": _with_texts(snapshot, open_texts(key, snapshot["tenant_id"], _texts_of(snapshot)),
                                                  None)}
    return fields


def _sealed(table: str, fields: dict[str, Any], tenant_id: str, tenant_key: bytes | None,
            users: UserKeyFiles | None) -> dict[str, Any]:
    if tenant_key is None:
        return fields

    def key_for(d: dict[str, Any]) -> bytes:
        user = d.get("user_id")
        return users.current(tenant_id, user) if users is not None and user else tenant_key

    if table == "memories":
        key = key_for(fields)
        return _with_texts(fields, seal(key, tenant_id, _texts_of(fields)), "\\x" + key.hex())
    snapshot = fields.get("snapshot")
    if isinstance(snapshot, dict):
        key = key_for(snapshot)
        sealed = _with_texts(snapshot, seal(key, tenant_id, _texts_of(snapshot)), base64.b64encode(key).decode())
        return {**fields, "snapshot": sealed}
    return fields


def _chunks(rows: Iterable[ExportedRow]) -> Iterator[list[ExportedRow]]:
    it = iter(rows)
    while chunk := list(islice(it, _CHUNK)):
        yield chunk
