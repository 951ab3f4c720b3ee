"""What Watch draws on, filled by the composition root (services/deps.py, `narrowed`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ...stores.postgres.changes import ChangeListener, ChangeStore


class WatchSettings(Protocol):
    change_retention_seconds: float
    watch_max_streams_per_key: int
    watch_max_streams_per_tenant: int


@dataclass(frozen=True)
class WatchDeps:
    settings: WatchSettings
    changes: ChangeStore
    change_listener: ChangeListener
