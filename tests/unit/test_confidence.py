"""Task outcomes move a lesson's confidence noisy-OR style, within bounds, and its serving status
follows the pending threshold both ways."""
from __future__ import annotations

import pytest

from memplane_server.core.model import Status
from memplane_server.core.reflection.confidence import CEILING, FLOOR, after_outcome, served_status


def test_three_failures_take_a_certain_lesson_below_the_default_threshold():
    confidence = 1.0
    for _ in range(3):
        confidence = after_outcome(confidence, "failure")
    assert confidence < 0.7 < after_outcome(after_outcome(1.0, "failure"), "failure")


def test_four_successes_take_a_doubtful_lesson_above_the_default_threshold():
    confidence = 0.5
    for _ in range(3):
        confidence = after_outcome(confidence, "success")
    assert confidence < 0.7 <= after_outcome(confidence, "success")


def test_a_partial_outcome_changes_nothing():
    assert after_outcome(0.42, "partial") == 0.42


@pytest.mark.parametrize("start, outcome", [(1.0, "success"), (0.0, "failure")])
def test_the_bounds_never_move_a_memory_against_its_outcome(start, outcome):
    assert after_outcome(start, outcome) == start


def test_the_bounds_keep_long_records_from_reaching_certainty():
    up = down = 0.5
    for _ in range(100):
        up, down = after_outcome(up, "success"), after_outcome(down, "failure")
    assert (up, down) == (CEILING, FLOOR)


@pytest.mark.parametrize("status, confidence, expected", [
    (Status.ACTIVE, 0.69, Status.PENDING), (Status.ACTIVE, 0.7, Status.ACTIVE),
    (Status.PENDING, 0.7, Status.ACTIVE), (Status.PENDING, 0.5, Status.PENDING),
    (Status.DELETED, 0.9, Status.DELETED), (Status.SUPERSEDED, 0.1, Status.SUPERSEDED),
])
def test_serving_follows_the_threshold_only_for_active_and_pending(status, confidence, expected):
    assert served_status(status, confidence, 0.7) is expected
