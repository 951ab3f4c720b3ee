"""What a Write did with each item, so the caller is told when its text was not stored as a memory
of its own (merged into one stating the same) and which memory it replaced or contradicts."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Outcome(str, Enum):
    CREATED = "created"  # stored as a new memory
    MERGED = "merged"  # the same statement was stored: that memory was observed again
    SUPERSEDED = "superseded"  # stored as the new value of its entity and attribute; the old one kept in history
    NEEDS_CONFIRMATION = "needs_confirmation"  # stored, held back: it contradicts a confident current value
    REPLAYED = "replayed"  # the request_id was stored before: answered from its record, nothing stored now


@dataclass(frozen=True)
class ItemOutcome:
    outcome: Outcome
    related_id: str = ""  # the memory it was merged into, superseded or contradicts
    reason: str = ""


CREATED = ItemOutcome(Outcome.CREATED)
REPLAYED = ItemOutcome(Outcome.REPLAYED, reason="answered from the earlier request with this request_id")
