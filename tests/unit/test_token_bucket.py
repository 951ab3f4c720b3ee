"""The in-memory fallback bucket behaves like the shared Redis one."""
from __future__ import annotations

from memplane_server.core.access.token_bucket import MAX_KEYS, LocalBuckets


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_a_wait():
    buckets = LocalBuckets(per_second=2, burst=3, clock=Clock())
    decisions = [buckets.take("k") for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert decisions[-1].retry_after_seconds == 0.5


def test_tokens_refill_with_time():
    clock = Clock()
    buckets = LocalBuckets(per_second=10, burst=1, clock=clock)
    assert buckets.take("k").allowed and not buckets.take("k").allowed
    clock.now += 0.1
    assert buckets.take("k").allowed


def test_keys_have_their_own_buckets():
    buckets = LocalBuckets(per_second=1, burst=1, clock=Clock())
    assert buckets.take("a").allowed and buckets.take("b").allowed


def test_zero_rate_is_unlimited():
    buckets = LocalBuckets(per_second=0, burst=1, clock=Clock())
    assert all(buckets.take("k").allowed for _ in range(50))


def test_memory_stays_bounded_by_forgetting_the_least_recent_keys():
    buckets = LocalBuckets(per_second=1, burst=1, clock=Clock())
    for n in range(MAX_KEYS + 50):
        buckets.take(f"k{n}")
    assert len(buckets._buckets) == MAX_KEYS and "k0" not in buckets._buckets
