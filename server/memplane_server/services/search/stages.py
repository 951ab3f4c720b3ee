"""Where a search's time goes, stage by stage, for the benchmarks (bench/peers.py): inside
`recording()` each `stage(name)` keeps its start and end; outside it a stage costs one
context-variable read, so the request path keeps its marks in production at no measurable cost.

Tasks started inside `recording()` copy the context, so a channel running in a task of its own
adds its stage to the same list."""
from __future__ import annotations

import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Stage:
    name: str
    start: float  # time.perf_counter()
    end: float

    @property
    def ms(self) -> float:
        return (self.end - self.start) * 1000


_stages: ContextVar[list[Stage] | None] = ContextVar("search_stages", default=None)


@contextmanager
def recording() -> Iterator[list[Stage]]:
    """The stages run inside, in the order they ended."""
    stages: list[Stage] = []
    token = _stages.set(stages)
    try:
        yield stages
    finally:
        _stages.reset(token)


@contextmanager
def stage(name: str) -> Iterator[None]:
    stages = _stages.get()
    if stages is None:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        stages.append(Stage(name, start, time.perf_counter()))


async def staged(name: str, work: Awaitable[T]) -> T:
    """Awaits work as one stage."""
    with stage(name):
        return await work
