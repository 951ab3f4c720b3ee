"""What the forget wing draws on (Forget, erasure of a user, lifecycle policies, the copies outside
PostgreSQL), filled by the composition root (services/deps.py, `narrowed`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ...core.forget.lifecycle import Clock
from ...stores.postgres.decisions import DecisionStore
from ...stores.postgres.jobs import JobStore
from ...stores.postgres.memories import MemoryStore
from ...stores.postgres.tenancy import TenancyStore
from ...stores.redis.idempotency import IdempotencyStore
from ...stores.redis.working import WorkingStore


class ForgetSettings(Protocol):
    max_batch: int
    erase_sync_max_memories: int


@dataclass(frozen=True)
class ForgetDeps:
    settings: ForgetSettings
    memories: MemoryStore
    tenancy: TenancyStore  # the audit log, and who administers a tenant
    decisions: DecisionStore  # signals about a user
    jobs: JobStore  # large erasures in the background
    working: WorkingStore  # copies in Redis
    idempotency: IdempotencyStore | None  # cached answers holding what is forgotten
    clock: Clock
