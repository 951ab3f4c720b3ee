"""Token buckets per key, in memory: the rate limiter's fallback while the shared one (Redis)
is unreachable. Same rule as the shared script: `burst` tokens, refilled at `per_second`."""
from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

MAX_KEYS = 10_000


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_seconds: float


class LocalBuckets:
    def __init__(self, *, per_second: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_second = per_second
        self.burst = burst
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, at)

    def take(self, key: str) -> Decision:
        if self.per_second <= 0:
            return Decision(True, 0.0)
        now = self.clock()
        tokens, at = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + max(0.0, now - at) * self.per_second)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = math.ceil((1 - tokens) * 1000 / self.per_second) / 1000
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > MAX_KEYS:  # the least recently used key forgets its bucket
            self._buckets.popitem(last=False)
        return Decision(wait == 0, wait)
