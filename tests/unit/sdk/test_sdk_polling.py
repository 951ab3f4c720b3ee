"""The wait_operation polling schedule."""
from __future__ import annotations

import pytest

from memplane import Operation, OperationState
from memplane._polling import OperationWait


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def op(state: OperationState) -> Operation:
    return Operation("op1", "reflect", state, 1, "", "", None, None, (), "")


@pytest.mark.parametrize("state", [OperationState.SUCCEEDED, OperationState.FAILED, OperationState.CANCELLED])
def test_a_done_operation_ends_the_wait(state):
    assert OperationWait("op1", poll_interval=0.5, timeout=5, clock=FakeClock()).delay_after(op(state)) is None


def test_a_running_operation_is_polled_again_after_the_interval():
    wait = OperationWait("op1", poll_interval=0.5, timeout=5, clock=FakeClock())
    assert wait.delay_after(op(OperationState.RUNNING)) == 0.5


def test_the_last_pause_ends_at_the_deadline():
    clock = FakeClock()
    wait = OperationWait("op1", poll_interval=0.5, timeout=5, clock=clock)
    clock.now = 4.8
    assert wait.delay_after(op(OperationState.PENDING)) == pytest.approx(0.2)


def test_still_running_at_the_deadline_raises_timeout():
    clock = FakeClock()
    wait = OperationWait("op1", poll_interval=0.5, timeout=5, clock=clock)
    clock.now = 5.0
    with pytest.raises(TimeoutError, match="op1 still RUNNING"):
        wait.delay_after(op(OperationState.RUNNING))


def test_non_positive_interval_is_rejected():
    with pytest.raises(ValueError):
        OperationWait("op1", poll_interval=0, timeout=5)
