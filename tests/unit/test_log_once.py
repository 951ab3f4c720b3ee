"""A failing dependency logs once per cause and interval, not once per call."""
from __future__ import annotations

import logging

from memplane_server.logs import OncePerCause, cause_of


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_repeats_within_the_interval_are_counted_not_logged(caplog):
    clock = Clock()
    once = OncePerCause(logging.getLogger("t"), interval=60, clock=clock)
    with caplog.at_level(logging.WARNING, logger="t"):
        logged = [once.log("redis", "redis down", exc_info=False) for _ in range(1000)]
        clock.now += 61
        once.log("redis", "redis down", exc_info=False)
    assert logged.count(True) == 1
    assert [r.getMessage() for r in caplog.records] == ["redis down", "redis down (999 more since last logged)"]


def test_causes_are_logged_apart():
    once = OncePerCause(logging.getLogger("t"), clock=Clock())
    assert once.log("a", "x", exc_info=False) and once.log("b", "y", exc_info=False)


def test_the_cause_of_an_exception_names_its_type_and_place_not_its_message():
    def fail(text):
        raise ValueError(text)

    causes = set()
    for text in ("secret one", "secret two"):
        try:
            fail(text)
        except ValueError as exc:
            causes.add(cause_of(exc))
    [cause] = causes
    assert cause.startswith("builtins.ValueError@") and "secret" not in cause
