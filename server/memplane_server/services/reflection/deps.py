"""What the reflection wing draws on (Reflect, consolidation, task outcomes, the triggers after a
write), filled by the composition root (services/deps.py, `narrowed`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ...llm.chat import ChatModel
from ...llm.embedders import Embedder
from ...stores.postgres.decisions import DecisionStore
from ...stores.postgres.jobs import JobStore
from ...stores.postgres.memories import MemoryStore
from ..content.keys import TenantKeys
from ..content.policies import ContentPolicies
from ..cpu import CpuLane


class ReflectionSettings(Protocol):
    max_batch: int
    max_content_bytes: int
    dedup_threshold: float
    pending_threshold: float
    grouping_max_rows: int
    reflect_sync_max_items: int
    reflect_every_turns: int
    reflect_on_entity_change: bool


@dataclass(frozen=True)
class ReflectionDeps:
    settings: ReflectionSettings
    memories: MemoryStore
    decisions: DecisionStore  # what reflection kept and dropped, and sessions' turns
    jobs: JobStore  # reflections in the background
    content: ContentPolicies
    keys: TenantKeys
    embedder: Embedder
    llm: ChatModel | None
    cpu: CpuLane  # grouping, off the event loop
