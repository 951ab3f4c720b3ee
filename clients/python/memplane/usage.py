"""What the admin clients answer about what tenants used per UTC day: calls by method, texts
embedded, LLM tokens by stage, and memories and bytes stored by layer and scope."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Mapping

from .enums import Layer, Scope


@dataclass(frozen=True)
class StoredUsage:
    """One layer and scope as the day's last roll-up found it: active memories, and the bytes of
    every row kept (superseded and soft-forgotten ones too)."""

    layer: Layer
    scope: Scope
    memories: int
    bytes: int


@dataclass(frozen=True)
class DayUsage:
    day: date
    calls: Mapping[str, int] = field(default_factory=dict)  # by method
    texts_embedded: int = 0
    tokens: Mapping[str, int] = field(default_factory=dict)  # LLM tokens by stage
    stored: tuple[StoredUsage, ...] = ()
    stored_at: datetime | None = None  # when the day's last roll-up ran


@dataclass(frozen=True)
class TenantUsage:
    tenant_id: str
    days: tuple[DayUsage, ...]  # newest first; days with no usage left out


@dataclass(frozen=True)
class UsageReport:
    """Usage from start_day to end_day, by tenant."""

    start_day: date
    end_day: date
    tenants: tuple[TenantUsage, ...]

    def rows(self) -> list[tuple[str, str, str, str, int]]:
        """(tenant, day, metric, name, value) for every figure: the form of a billing export.
        Metrics: calls (name: the method), texts_embedded, llm_tokens (name: the stage),
        memories_stored and bytes_stored (name: layer/scope)."""
        out = []
        for tenant in self.tenants:
            for d in tenant.days:
                day = d.day.isoformat()
                out += [(tenant.tenant_id, day, "calls", m, n) for m, n in sorted(d.calls.items())]
                if d.texts_embedded:
                    out.append((tenant.tenant_id, day, "texts_embedded", "", d.texts_embedded))
                out += [(tenant.tenant_id, day, "llm_tokens", s, n) for s, n in sorted(d.tokens.items())]
                for s in d.stored:
                    where = f"{s.layer.name.lower()}/{s.scope.name.lower()}"
                    out += [(tenant.tenant_id, day, "memories_stored", where, s.memories),
                            (tenant.tenant_id, day, "bytes_stored", where, s.bytes)]
        return out
