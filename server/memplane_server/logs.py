"""Logging that a failing dependency cannot flood: each cause is logged in full once, then at
most once a minute with how often it recurred."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

QUIET_SECONDS = 60.0


class OncePerCause:
    """Logs the first occurrence of a cause (with its traceback) and then a summary per interval."""

    def __init__(self, logger: logging.Logger, *, interval: float = QUIET_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()  # background threads log through the same object
        self._last: dict[str, tuple[float, int]] = {}  # cause -> (when last logged, suppressed since)

    def log(self, cause: str, message: str, *args, level: int = logging.ERROR, exc_info: bool = True) -> bool:
        """Logs unless the cause was logged within the interval; returns whether it logged."""
        now = self.clock()
        with self._lock:
            last = self._last.get(cause)
            if last is not None and now - last[0] < self.interval:
                self._last[cause] = (last[0], last[1] + 1)
                return False
            suppressed = last[1] if last else 0
            self._last[cause] = (now, 0)
            if len(self._last) > 1000:  # causes carry no caller input, but stay bounded anyway
                self._last = {cause: self._last[cause]}
        if suppressed:
            message += f" ({suppressed} more since last logged)"
        # A traceback only the first time: after that the summary line says it all.
        self.logger.log(level, message, *args, exc_info=exc_info and last is None)
        return True


def cause_of(exc: BaseException) -> str:
    """A log key for an exception: its type and where it was raised, never its message (which may
    carry caller input)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else ""
    return f"{type(exc).__module__}.{type(exc).__qualname__}@{where}"
