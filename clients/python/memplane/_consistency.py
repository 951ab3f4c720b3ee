"""Read-your-writes when the server reads on a standby: each change's answer says where the
primary's write-ahead log stood after it (trailing metadata), the client keeps the highest it was
told, and sends it with the reads a standby may serve, so the server waits for the standby to
replay this client's writes, or reads the primary. Servers without a standby send nothing."""
from __future__ import annotations

import threading
from collections.abc import Iterable

from ._auth import Metadata

WRITTEN_UP_TO = "x-memplane-written-up-to"
READ_AFTER = "x-memplane-read-after"
STANDBY_READS = frozenset({"Search", "GetMemory", "ListMemories"})


def _order(position: str) -> int:
    high, _, low = position.partition("/")
    return int(high, 16) << 32 | int(low, 16)


class WritePosition:
    """The furthest write position the server gave this client (shared by its threads)."""

    def __init__(self) -> None:
        self._position: str | None = None
        self._lock = threading.Lock()

    def metadata(self, method: str, metadata: Metadata) -> Metadata:
        position = self._position
        if position is None or method not in STANDBY_READS:
            return metadata
        return (*metadata, (READ_AFTER, position))

    def learn(self, trailing: Iterable[tuple[str, str | bytes]] | None) -> None:
        for key, value in trailing or ():
            if key != WRITTEN_UP_TO or not isinstance(value, str):
                continue
            try:
                order = _order(value)
            except ValueError:
                continue  # not a position: nothing to wait for
            with self._lock:
                if self._position is None or order > _order(self._position):
                    self._position = value
