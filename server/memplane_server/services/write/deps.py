"""What the write wing draws on (Write, extraction, turn windows, session digests), filled by the
composition root (services/deps.py, `narrowed`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ...llm.chat import ChatModel
from ...llm.embedders import Embedder
from ...stores.postgres.contexts import ContextStore
from ...stores.postgres.jobs import JobStore
from ...stores.postgres.memories import MemoryStore
from ...stores.postgres.search.digests import DigestStore
from ...stores.redis.working import WorkingStore
from ..content.keys import TenantKeys
from ..content.policies import ContentPolicies


class WriteSettings(Protocol):
    max_batch: int
    max_content_bytes: int
    dedup_threshold: float
    pending_threshold: float
    conflict_window_seconds: float
    conflict_min_confidence: float
    idempotency_ttl_seconds: int
    working_ttl_seconds: int
    context_window: int
    context_vectors: str
    session_digests: bool
    session_digest_llm: bool


@dataclass(frozen=True)
class WriteDeps:
    settings: WriteSettings
    memories: MemoryStore
    working: WorkingStore
    contexts: ContextStore  # turn windows
    digests: DigestStore  # session digests
    jobs: JobStore  # extraction in the background
    content: ContentPolicies  # every write is screened
    keys: TenantKeys  # ... and sealed
    embedder: Embedder
    llm: ChatModel | None
