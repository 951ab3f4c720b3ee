"""`memplane export` and `memplane import`: one tenant as JSON lines, to move it between
deployments or copy it under another tenant id.

What travels: the tenant, its agents, the domains its memories live in, every memory with
every column (vectors with their model id, turn windows) and the memories' history. What does
not: API keys (secrets stay with the deployment that issued them), domains and their grants (a
platform admin's decision: domain memories import only into domains the tenant is granted
read-write here), the quota (unless --keep-quota), operations, the audit log and working memory
(Redis, short-lived).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import asyncpg

from ..core.backups import SchemaTooNew, check_schema_version
from ..core.transfer import (
    ExportedRow,
    ExportHeader,
    Retarget,
    TransferFormatError,
    decode_header,
    decode_row,
    encode_header,
    encode_row,
)
from ..key_setup import open_with_keys
from ..settings import Settings
from ..stores.postgres.bulk.transfer import ImportConflict, ImportRefused, UnknownTenant, export_tenant, import_rows
from ..stores.postgres.migrations import latest_version
from ..stores.sealing import SealError
from ..stores.user_keys import UserKeyFiles
from . import ToolError
from .database import tool_database


def export(database_url: str, tenant_id: str, out: Path | None, *, open_users: bool = False) -> int:
    """Writes the tenant's export to `out` (stdout when None); returns how many rows it holds.
    Memories about users stay sealed under their users' keys unless open_users."""
    if out is None:
        return _export(database_url, tenant_id, sys.stdout, open_users)
    # Complete or absent: a failed export must not leave a file that looks like one.
    partial = out.with_name(f".{out.name}.partial")
    with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as file:
        try:
            rows = _export(database_url, tenant_id, file, open_users)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    os.replace(partial, out)
    return rows


def _export(database_url: str, tenant_id: str, out: TextIO, open_users: bool) -> int:
    async def run() -> int:
        conn = await asyncpg.connect(database_url)
        try:
            rows = 0
            async for item in export_tenant(conn, tenant_id, open_users=open_users):
                if isinstance(item, ExportHeader):
                    out.write(encode_header(item) + "\n")
                else:
                    out.write(encode_row(item) + "\n")
                    rows += 1
            return rows
        finally:
            await conn.close()

    try:
        return asyncio.run(run())
    except UnknownTenant:
        raise ToolError(f"no tenant {tenant_id!r}") from None


@dataclass(frozen=True)
class Imported:
    tenant_id: str
    counts: dict[str, int]
    # Memories whose vectors come from another model than MEMPLANE_EMBEDDING_MODEL, by model:
    # stored as they are, and stale for `memplane reembed`, which moves every such row.
    stale_vectors: dict[str, int]


def import_(settings: Settings, database_url: str, path: Path, tenant_id: str | None, *,
            keep_quota: bool = False) -> Imported:
    """Imports an export file into `tenant_id` (default: the exported tenant), all or nothing;
    the file's quota is kept for a new tenant only with keep_quota."""
    try:
        header, memory_ids = _scan(path)
        check_schema_version(f"export {path}", header.schema_version, latest_version())
    except (OSError, TransferFormatError, SchemaTooNew) as exc:
        raise ToolError(str(exc)) from None
    retarget = Retarget(header.tenant_id, tenant_id or header.tenant_id, memory_ids)
    stale: dict[str, int] = {}
    keys = open_with_keys(settings)
    _check_user_key_store(header, keys.users)

    def rows() -> Iterator[ExportedRow]:
        for row in _rows(path):
            moved = retarget.row(row)
            model = moved.fields.get("embedding_model")
            if moved.table == "memories" and model != settings.embedding_model and moved.fields.get("embedding"):
                stale[model] = stale.get(model, 0) + 1
            yield moved

    async def run() -> dict[str, int]:
        conn = await asyncpg.connect(database_url)
        try:
            return await import_rows(conn, retarget.target, rows(), keep_quota=keep_quota,
                                     active_kek=keys.active_kek, users=keys.users)
        finally:
            await conn.close()

    try:
        counts = asyncio.run(run())
    except ImportConflict as exc:
        raise ToolError(
            f"nothing imported: {str(exc).rstrip('.')} (a file is imported once per tenant; import into another"
            " tenant id with --tenant)"
        ) from None
    except ImportRefused as exc:
        domains = ", ".join(exc.args[0])
        raise ToolError(
            f"nothing imported: the file holds memories of domains {domains}, which tenant {retarget.target} may not"
            " write here (a platform admin creates each domain and grants it first: `memplane admin create-domain"
            f" <domain>`, then `memplane admin grant --domain <domain> --tenant {retarget.target} --access read_write`)"
        ) from None
    except asyncpg.PostgresError as exc:
        raise ToolError(f"nothing imported: {exc}") from None
    return Imported(retarget.target, counts, stale)


def _check_user_key_store(header: ExportHeader, users: UserKeyFiles | None) -> None:
    """A file whose memories about users stay sealed opens only with the users' keys it names."""
    if header.user_key_store is None:
        return
    ours = users.store_id() if users is not None else None
    if ours != header.user_key_store:
        raise ToolError(
            f"nothing imported: the file's memories about users are sealed under the users' keys of key folder"
            f" {header.user_key_store}, which this deployment does not hold (its folder: {ours or 'none'}); to move"
            " a tenant to another deployment, export it with --open-users (the file then holds those memories"
            " opened, and an erasure no longer reaches that file); docs/security.md")


def _scan(path: Path) -> tuple[ExportHeader, set[str]]:
    """Reads the whole file once before writing anything: the header, that every line parses,
    and the memory ids (references to them are rewritten on a move to another tenant id)."""
    with path.open(encoding="utf-8") as file:
        header = decode_header(file.readline())
    ids = {row.fields["id"] for row in _rows(path) if row.table == "memories" and isinstance(row.fields.get("id"), str)}
    return header, ids


def _rows(path: Path) -> Iterator[ExportedRow]:
    with path.open(encoding="utf-8") as file:
        file.readline()
        for number, line in enumerate(file, start=2):
            if line.strip():
                yield decode_row(line, number)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """`memplane export` and `memplane import`."""
    open_with_keys(settings)
    try:
        return _run(args, settings)
    except SealError as exc:
        raise ToolError(f"{exc}: give this deployment's key-encryption keys (MEMPLANE_ENCRYPTION_KEYS or"
                        " MEMPLANE_ENCRYPTION_KEYS_FILE), as the server has them") from None


def _run(args: argparse.Namespace, settings: Settings) -> int:
    with tool_database(settings) as url:
        if args.cmd == "export":
            rows = export(url, args.tenant, args.out, open_users=args.open_users)
            print(f"exported tenant {args.tenant}: {rows} rows", file=sys.stderr)
            return 0
        done = import_(settings, url, args.file, args.tenant, keep_quota=args.keep_quota)
    counts = {t: n for t, n in done.counts.items() if not t.startswith("erased_")}
    print(f"imported into tenant {done.tenant_id}: " + ", ".join(f"{n} {table}" for table, n in counts.items()))
    if done.counts.get("erased_memories") or done.counts.get("erased_history"):
        print(f"left out as erased: {done.counts['erased_memories']} memories and {done.counts['erased_history']}"
              " history entries sealed under the keys of users erased since the export", file=sys.stderr)
    for model, n in done.stale_vectors.items():
        print(f"{n} memories carry vectors of {model}, not {settings.embedding_model}:"
              " run `memplane reembed` to move them", file=sys.stderr)
    return 0
