"""What the admin clients answer about a tenant's policies: its lifecycle policy and a run's report,
and a tenant's or domain's content policy and a dry-run scan's report."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from .enums import ContentAction, Kind


@dataclass(frozen=True)
class LifecycleKindRule:
    """The lifecycle rules of one kind of memory; a zero turns a rule off (see the README)."""

    kind: Kind
    ttl_days: float = 0.0
    unused_days: float = 0.0
    unused_below_confidence: float = 0.0
    value_half_life_days: float = 0.0
    min_value: float = 0.0
    review_min_uses: int = 0
    review_below_confidence: float = 0.0
    demote_after_days: float = 0.0
    demote_max_uses: int = 0
    demote_min_confidence: float = 0.0
    demote_weight: float = 1.0


@dataclass(frozen=True)
class LifecyclePolicy:
    """A tenant's lifecycle policy. On set, kinds without a rule take the defaults; get lists every kind."""

    tenant_id: str = ""
    enabled: bool = False
    hard_delete: bool = False
    archive_tasks_after_days: float = 30.0
    rules: tuple[LifecycleKindRule, ...] = ()
    is_set: bool = False  # output: False when these are the defaults
    update_time: datetime | None = None

    def rule(self, kind: Kind | str) -> LifecycleKindRule | None:
        """The rule of a kind (a Kind or its name), if listed."""
        wanted = Kind.parse(kind)
        return next((r for r in self.rules if Kind.parse(r.kind) is wanted), None)


@dataclass(frozen=True)
class LifecycleReport:
    """What a lifecycle run did, or would do (dry_run): per rule the count and ids (first 1000)."""

    tenant_id: str
    run_time: datetime | None
    dry_run: bool
    examined: int
    counts: dict[str, int]
    memory_ids: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class ContentPolicy:
    """A tenant's or a domain's content policy: rules by detector or category ("secret",
    "personal") as set, and every detector's action (effective). A domain memory gets, per
    detector, the stricter of its tenant's and its domain's action."""

    tenant_id: str = ""
    domain: str = ""
    rules: dict[str, ContentAction] = field(default_factory=dict)
    effective: dict[str, ContentAction] = field(default_factory=dict)
    is_set: bool = False  # output: False when these are the defaults
    update_time: datetime | None = None
    updated_by: str = ""


@dataclass(frozen=True)
class ContentScanReport:
    """What a content policy would change in the stored memories (a dry run; nothing changed):
    memories per (detector, action), and per change the count and the first 1000 ids."""

    examined: int
    counts: dict[tuple[str, ContentAction], int]
    refused: int
    redacted: int
    tagged: int
    refused_memory_ids: tuple[str, ...]
    redacted_memory_ids: tuple[str, ...]
    tagged_memory_ids: tuple[str, ...]
