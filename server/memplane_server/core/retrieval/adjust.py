"""Score adjustments after fusion: kind intent, recency, confidence. Each is one factor that the
score explanation lists."""
from __future__ import annotations

import math
from datetime import datetime

from ..model import Kind, MemoryRecord
from .intent import INTENT_KINDS, Intent
from .time_expressions import TimeRange

INTENT_BONUS = 1.3


def kind_bonus(intent: Intent, kind: Kind) -> float:
    return INTENT_BONUS if kind in INTENT_KINDS[intent] else 1.0


def recency(memory: MemoryRecord, now: datetime, lambdas: dict[str, float]) -> float:
    """exp(-lambda * age_days), age from when the memory happened (or was written)."""
    rate = lambdas.get(memory.kind.value, 0.0)
    moment = memory.occurred_at or memory.created_at
    if not rate or moment is None:
        return 1.0
    age_days = max(0.0, (now - moment).total_seconds() / 86400)
    return math.exp(-rate * age_days)


def confidence_weight(memory: MemoryRecord) -> float:
    # Halves the score of a memory nobody believes, leaves a certain one as it is.
    return 0.5 + 0.5 * memory.confidence


CONSOLIDATED = 0.8


def consolidated_weight(memory: MemoryRecord) -> float:
    """A lesson or procedure that a more general consolidated memory stands for ranks below it."""
    return CONSOLIDATED if memory.consolidated_into else 1.0


def lifecycle_weight(memory: MemoryRecord) -> float:
    """A rarely used but confident memory that a lifecycle policy kept at a lower weight."""
    return memory.lifecycle_weight


OUT_OF_TIME = 0.5


def valid_time_weight(memory: MemoryRecord, span: TimeRange | None) -> float:
    """A structured fact that did not hold during the time the query asks about is a weaker answer
    to it ("what was my city in 2022?" is not answered by the city since 2023)."""
    if span is None or memory.entity is None:
        return 1.0
    start = memory.valid_from or memory.occurred_at
    held = (start is None or start < span.end) and (memory.valid_to is None or memory.valid_to > span.start)
    return 1.0 if held else OUT_OF_TIME
