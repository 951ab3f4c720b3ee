"""How task outcomes move the confidence of the lessons and procedures a task used.

Noisy-OR both ways: a success is one more independent piece of evidence for the memory
(1 - (1 - c)(1 - STEP)), a failure one against it (c (1 - STEP)). Steps shrink near the bounds,
so a long record is not undone by one result, and no memory reaches certainty either way. With
STEP 0.15 a lesson at 1.0 falls below the default pending threshold (0.7) after three failures
and one at 0.5 rises above it after four successes.
"""
from __future__ import annotations

from ..model import Kind, Status

OUTCOME_KINDS = frozenset({Kind.LESSON, Kind.PROCEDURE})
STEP = 0.15
FLOOR, CEILING = 0.01, 0.99


def after_outcome(confidence: float, outcome: str) -> float:
    """The confidence after one task with this outcome used the memory (partial: unchanged)."""
    bounded = lambda c: round(min(CEILING, max(FLOOR, c)), 6)  # noqa: E731
    if outcome == "success":  # never lowered by the bound, e.g. from 1.0
        return max(confidence, bounded(1 - (1 - confidence) * (1 - STEP)))
    if outcome == "failure":
        return min(confidence, bounded(confidence * (1 - STEP)))
    return confidence


def served_status(status: Status, confidence: float, pending_threshold: float) -> Status:
    """Active memories whose confidence fell below the threshold stop being served by default;
    pending ones that rose above it are served again. Other states are not the confidence's to change."""
    if status is Status.ACTIVE and confidence < pending_threshold:
        return Status.PENDING
    if status is Status.PENDING and confidence >= pending_threshold:
        return Status.ACTIVE
    return status
