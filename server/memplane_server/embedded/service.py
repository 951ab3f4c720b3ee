"""What the embedded launchers share: the folder lock held from start to stop, clearing what a
killed earlier run left, and restarting on the same port so clients keep their address."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from ._process import DirLock, EmbeddedError


class EmbeddedService:
    """A server private to one folder. Subclasses say how to prepare the folder, stop a leftover,
    launch (returning the address clients use) and shut down."""

    name = "service"

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._lock = DirLock(folder / "lock")
        self._address: str | None = None
        # Chosen at start and kept by restarts, so that clients reconnect to the same address.
        self._port: int | None = None

    def start(self) -> str:
        """Start the server and return its address once it answers."""
        if self._address is not None:
            return self._address
        self._prepare()
        self._lock.acquire()
        try:
            self._stop_leftover()
            self._address = self._launch()
        except BaseException:
            self._lock.release()
            raise
        return self._address

    def stop(self) -> None:
        if self._address is None:
            return
        try:
            self._shutdown()
        finally:
            self._address = None
            self._port = None
            self._lock.release()

    def restart(self) -> None:
        """Start the server again after it died, on the same port with the same data and address."""
        if self._address is None:
            raise EmbeddedError(f"{self.name} cannot restart: it was not started")
        self._stop_leftover()
        self._launch()

    def __enter__(self):
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _prepare(self) -> None:
        raise NotImplementedError

    def _stop_leftover(self) -> None:
        raise NotImplementedError

    def _launch(self) -> str:
        raise NotImplementedError

    def _shutdown(self) -> None:
        raise NotImplementedError
