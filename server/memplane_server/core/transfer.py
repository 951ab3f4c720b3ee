"""The tenant export format (JSON lines) and how an import moves rows to another tenant id.

Line 1 is a header; every other line is one row of one table, with every column as PostgreSQL
renders it in JSON (vectors and tsvectors as their text form), so an export carries every field
of the schema version it names, and an import reads them back with the same input functions.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

FORMAT = "memplane.tenant-export"
FORMAT_VERSION = 1

# In the order an import must insert them: parents first, history after its memories.
TABLES = ("tenants", "agents", "domains", "memories", "memory_history")

# Memory ids are unique across a deployment (a domain memory is looked up without its tenant),
# so a copy under another tenant id needs new ones; derived from the target tenant, so importing
# the same file twice collides instead of duplicating.
_ID_NAMESPACE = uuid.UUID("6d656d70-6c61-6e65-2d65-78706f727431")


class TransferFormatError(ValueError):
    """A line that is not part of a Memplane tenant export."""


@dataclass(frozen=True)
class ExportHeader:
    tenant_id: str
    schema_version: int
    exported_at: datetime
    # The users' key folder the file's memories about users stay sealed under (None: all opened).
    user_key_store: str | None = None


# Marks a row whose texts stay sealed under a user's key, naming the tenant they were sealed in.
SEALED_TENANT = "$sealed_tenant"


@dataclass(frozen=True)
class ExportedRow:
    table: str
    fields: dict[str, Any]


def encode_header(header: ExportHeader) -> str:
    data = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "tenant_id": header.tenant_id,
        "schema_version": header.schema_version, "exported_at": header.exported_at.isoformat(),
    }
    if header.user_key_store is not None:
        data["user_key_store"] = header.user_key_store
    return json.dumps(data, ensure_ascii=False)


def encode_row(row: ExportedRow) -> str:
    return json.dumps({"table": row.table, "row": row.fields}, ensure_ascii=False, separators=(",", ":"))


def decode_header(line: str) -> ExportHeader:
    data = _object(line, 1)
    if data.get("format") != FORMAT or data.get("format_version") != FORMAT_VERSION:
        raise TransferFormatError(f"line 1 is not a {FORMAT} v{FORMAT_VERSION} header")
    try:
        store = data.get("user_key_store")
        return ExportHeader(str(data["tenant_id"]), int(data["schema_version"]),
                            datetime.fromisoformat(data["exported_at"]), str(store) if store is not None else None)
    except (KeyError, TypeError, ValueError) as exc:
        raise TransferFormatError(f"line 1: bad header ({exc})") from None


def decode_row(line: str, number: int) -> ExportedRow:
    data = _object(line, number)
    table, fields = data.get("table"), data.get("row")
    if table not in TABLES or not isinstance(fields, dict):
        raise TransferFormatError(f"line {number}: not a row of {', '.join(TABLES)}")
    return ExportedRow(table, fields)


def _object(line: str, number: int) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except ValueError:
        raise TransferFormatError(f"line {number} is not JSON") from None
    if not isinstance(data, dict):
        raise TransferFormatError(f"line {number} is not a JSON object")
    return data


class Retarget:
    """Puts exported rows under the target tenant. Every tenant column is set to the target, so
    a file cannot write into any other tenant; into another tenant id, memory ids (and every
    reference to them: supersedes, history, sources) are replaced by new ones."""

    def __init__(self, source_tenant: str, target_tenant: str, memory_ids: set[str]) -> None:
        self.target = target_tenant
        self._renames = target_tenant != source_tenant
        self._memory_ids = memory_ids

    def new_id(self, old: str) -> str:
        return str(uuid.uuid5(_ID_NAMESPACE, f"{self.target}/{old}")) if self._renames else old

    def row(self, row: ExportedRow) -> ExportedRow:
        fields = dict(row.fields)
        if row.table == "tenants":
            fields["id"] = self.target
        elif row.table == "agents":
            fields["tenant_id"] = self.target
        elif row.table == "memories":
            fields = self._memory(fields)
        elif row.table == "memory_history":
            fields["tenant_id"] = self.target
            fields["memory_id"] = self._ref(fields.get("memory_id"))
            if isinstance(fields.get("snapshot"), dict):
                fields["snapshot"] = self._memory(fields["snapshot"])
        return ExportedRow(row.table, fields)

    def _memory(self, fields: dict[str, Any]) -> dict[str, Any]:
        """A memory row or its history snapshot (same column names)."""
        out = dict(fields, tenant_id=self.target)
        for name in ("id", "supersedes", "source_id"):
            out[name] = self._ref(out.get(name))
        if isinstance(out.get("sources"), list):
            out["sources"] = [
                dict(s, id=self._ref(s.get("id"))) if isinstance(s, dict) else s for s in out["sources"]
            ]
        return out

    def _ref(self, value: Any) -> Any:
        # Only exported memory ids are references; a caller's own source id stays as it was.
        return self.new_id(value) if isinstance(value, str) and value in self._memory_ids else value
