"""Graceful shutdown: count calls in flight, refuse new ones once draining, wait for the rest."""
from __future__ import annotations

import asyncio


class Drain:
    def __init__(self) -> None:
        self.in_flight = 0
        self.draining = False
        self._idle = asyncio.Event()
        self._idle.set()
        # Set once draining starts: open streams (Watch) end at once, so clients resume elsewhere.
        self.stopping = asyncio.Event()

    def enter(self) -> None:
        self.in_flight += 1
        self._idle.clear()

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self._idle.set()

    async def wait_idle(self, timeout: float) -> bool:
        """Starts draining and waits until no call is in flight; False if time ran out first."""
        self.draining = True
        self.stopping.set()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True
