"""Everything the use cases draw on (settings, stores and models), built once at start by the
composition root, which hands each wing only what it uses: `narrowed` fills a wing's own
dependencies (a frozen dataclass naming the stores it touches and the view of the settings it
reads, a Protocol) from this whole. No use case sees the whole (tests/unit/test_layering.py)."""
from __future__ import annotations

import typing
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

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


W = TypeVar("W")


class SettingsView:
    """The settings a wing reads, and only those (the names its Protocol declares, from the one
    settings object): a wing that reached for another would fail here at once, as mypy fails it
    before that. The `MEMPLANE_*` names stay those of the one settings object."""

    def __init__(self, settings: Settings, view: type) -> None:
        self._settings = settings
        self._names = frozenset(typing.get_type_hints(view))
        self._view = view.__name__

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._names:
            raise AttributeError(f"{name!r} is not among the settings {self._view} reads")
        return getattr(self._settings, name)


def narrowed(wing: type[W], deps: Deps) -> W:
    """The wing's dependencies: each field taken from the field of `deps` of the same name, the
    settings as the view its type names."""
    hints = typing.get_type_hints(wing)
    return wing(**{f.name: SettingsView(deps.settings, hints[f.name]) if f.name == "settings" else getattr(deps, f.name)
                   for f in fields(wing)})  # type: ignore[arg-type]
