"""A Watch read in a thread through the SDK, keeping what it yields and how it ended."""
from __future__ import annotations

import threading
import time

from memplane import MemoryClient


class Collector:
    """Runs a watch in a thread and keeps what it yields."""

    def __init__(self, client: MemoryClient, **kwargs) -> None:
        self.items: list = []
        self.error: BaseException | None = None
        self.stream = client.watch(progress=True, **kwargs)  # the first item says the watch is open
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for item in self.stream:
                self.items.append(item)
        except BaseException as exc:  # noqa: BLE001 - reported by wait()
            self.error = exc

    def events(self):
        return [i for i in self.items if hasattr(i, "change_kind")]

    def wait(self, count: int, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while len(self.events()) < count:
            assert self.error is None, self.error
            assert time.monotonic() < deadline, f"{len(self.events())} events after {timeout} s, wanted {count}"
            time.sleep(0.05)
        return self.events()


def started(c: Collector, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while not c.items:
        assert c.error is None, c.error
        assert time.monotonic() < deadline, "the watch did not start"
        time.sleep(0.02)
    return c.items[0].position
