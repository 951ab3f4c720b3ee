"""What a search asks: its text, filter, limits and how its answer is weighed and explained."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ...core.model import MemoryFilter, Scope


@dataclass(frozen=True)
class SearchQuery:
    text: str
    filter: MemoryFilter = MemoryFilter()
    top_k: int = 0
    token_budget: int = 0
    as_of: datetime | None = None
    scope_weights: dict[Scope, float] = field(default_factory=dict)
    scope_order: tuple[Scope, ...] = ()
    explain: bool = False
    time_zone: str | None = None
