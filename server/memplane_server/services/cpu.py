"""CPU work of a request over many rows (grouping thousands of lessons) runs in a thread of its
own, one such step at a time: on the event loop it stalled every other call (2,000 lessons held it 7 s), and in
the loop's default executor a few at once would hold the threads that searches and writes use
for their own short steps."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class CpuLane:
    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memplane-cpu")

    async def run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    def close(self) -> None:
        # A step is bounded (MEMPLANE_GROUPING_MAX_ROWS): the one running finishes, queued ones are dropped.
        self._pool.shutdown(wait=False, cancel_futures=True)
