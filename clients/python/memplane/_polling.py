"""The polling schedule of wait_operation, shared by the sync and async clients."""
from __future__ import annotations

import time
from typing import Callable

from .types import Operation


class OperationWait:
    """Decides when wait_operation polls next and when it gives up."""

    def __init__(
        self, operation_id: str, *, poll_interval: float, timeout: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if poll_interval <= 0 or timeout <= 0:
            raise ValueError("poll_interval and timeout must be positive")
        self._operation_id = operation_id
        self._poll_interval = poll_interval
        self._timeout = timeout
        self._clock = clock
        self._deadline = clock() + timeout

    def delay_after(self, operation: Operation) -> float | None:
        """None once operation is done, else the pause before the next poll.

        The last pause ends at the deadline and is followed by one final poll, so an operation
        finishing just in time is still seen; each poll keeps the client's own call timeout.

        Raises:
            TimeoutError: The operation is still running and the wait's time is up.
        """
        if operation.done:
            return None
        remaining = self._deadline - self._clock()
        if remaining <= 0:
            raise TimeoutError(
                f"operation {self._operation_id} still {operation.state.name} after {self._timeout:g} s"
            )
        return min(self._poll_interval, remaining)
