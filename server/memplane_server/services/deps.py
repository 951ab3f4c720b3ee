"""What the use cases share: settings, stores and models, built once at start."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.forget.lifecycle import Clock, wall_clock
from ..core.metering import UsageTally
from ..llm.chat import ChatModel
from ..llm.embedders import Embedder
from ..settings import Settings
from ..stores.postgres.changes import ChangeListener, ChangeStore
from ..stores.postgres.conflicts import ConflictStore
from ..stores.postgres.contexts import ContextStore
from ..stores.postgres.decisions import DecisionStore
from ..stores.postgres.jobs import JobStore
from ..stores.postgres.memories import MemoryStore
from ..stores.postgres.search.digests import DigestStore
from ..stores.postgres.search.entities import EntityStore
from ..stores.postgres.search.feedback import FeedbackStore
from ..stores.postgres.search.keyword_stats import KeywordStatsStore
from ..stores.postgres.search.planner_stats import PlannerStatsStore
from ..stores.postgres.tenancy import TenancyStore
from ..stores.redis.idempotency import IdempotencyStore
from ..stores.redis.working import WorkingStore
from .content.keys import TenantKeys
from .content.policies import ContentPolicies
from .cpu import CpuLane


@dataclass
class Deps:
    settings: Settings
    memories: MemoryStore
    tenancy: TenancyStore
    jobs: JobStore
    contexts: ContextStore
    conflicts: ConflictStore
    decisions: DecisionStore
    keyword_stats: KeywordStatsStore
    planner_stats: PlannerStatsStore
    feedback: FeedbackStore
    entities: EntityStore
    digests: DigestStore
    working: WorkingStore
    embedder: Embedder
    llm: ChatModel | None
    changes: ChangeStore
    change_listener: ChangeListener
    # The content policies every write is screened against, read through a short cache.
    content: ContentPolicies
    # The tenants' data keys new memories are sealed under (none: encryption off).
    keys: TenantKeys
    # Cached responses of request ids; forgets and erasures drop what they remove from it.
    idempotency: IdempotencyStore | None = None
    # Wall time in production; tests inject one to age memories (search usage, lifecycle runs).
    clock: Clock = wall_clock
    cpu: CpuLane = field(default_factory=CpuLane)
    # What this process counted of each tenant's usage and has not written yet (services/metering.py).
    tally: UsageTally = field(default_factory=UsageTally)
