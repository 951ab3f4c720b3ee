"""What a tenant uses per UTC day, for capacity planning and charge-back: calls by method and texts
embedded, counted where they happen into the process's UsageTally and added to PostgreSQL every few
seconds off the request path; memories and bytes stored by layer and scope, rolled up from the
memories by a background pass (no scan per call); LLM tokens by stage (core/usage.py)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timezone

CALLS = "calls"  # name: the RPC's method
TEXTS_EMBEDDED = "texts_embedded"  # name: ""

TallyKey = tuple[str, date, str, str]  # tenant, UTC day, metric, name


class UsageTally:
    """One process's counts not yet written. Added to on the event loop (an interceptor, the
    embedder's wrapper): a dict update, no I/O, nothing the request waits on."""

    def __init__(self) -> None:
        self._counts: Counter[TallyKey] = Counter()

    def add(self, tenant_id: str, metric: str, name: str = "", n: int = 1, *, at: datetime | None = None) -> None:
        if tenant_id and n > 0:  # work of no tenant (a platform admin's call) is no tenant's usage
            self._counts[(tenant_id, (at or datetime.now(timezone.utc)).astimezone(timezone.utc).date(),
                          metric, name)] += n

    def take(self) -> Counter[TallyKey]:
        """Everything counted so far, the tally starting again from zero."""
        taken, self._counts = self._counts, Counter()
        return taken

    def give_back(self, counts: Counter[TallyKey]) -> None:
        """Counts that could not be written, kept for the next try."""
        self._counts.update(counts)


@dataclass(frozen=True)
class StoredCount:
    layer: str
    scope: str
    memories: int  # active memories
    bytes: int  # every row kept (superseded and soft-forgotten too), as PostgreSQL stores it


@dataclass(frozen=True)
class DayUsage:
    day: date
    calls: dict[str, int] = field(default_factory=dict)  # by method
    texts_embedded: int = 0
    tokens: dict[str, int] = field(default_factory=dict)  # LLM tokens (input and output) by stage
    stored: list[StoredCount] = field(default_factory=list)  # the day's last roll-up
    stored_at: datetime | None = None  # when that roll-up ran


@dataclass(frozen=True)
class TenantUsage:
    tenant_id: str
    days: list[DayUsage]  # newest first; days with nothing to say are left out
