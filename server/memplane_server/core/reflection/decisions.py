"""A reflection decision or signal as kept and listed (core/reflection/triggers.py decides)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class DecisionRecord:
    id: uuid.UUID
    subject_type: str  # task | session | search
    subject_id: str
    decision: str  # ran | skipped | signal
    reason: str
    created_at: datetime
    turns: int | None = None
    operation_id: uuid.UUID | None = None
