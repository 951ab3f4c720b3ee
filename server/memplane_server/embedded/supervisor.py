"""Restarts embedded services that die while the server runs."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Protocol

logger = logging.getLogger(__name__)

_CHECK_INTERVAL = 1.0
_MAX_BACKOFF = 30.0
# A service that stayed up this long is healthy again: its next death restarts it at once.
_STABLE_AFTER = 60.0


class Service(Protocol):
    name: str

    def running(self) -> bool: ...

    def restart(self) -> None: ...


@dataclass
class _State:
    up: bool = True
    restarts: int = 0
    next_try: float = 0.0
    up_since: float = 0.0
    last_error: str = ""


class Supervisor:
    """Checks each service every second and restarts a dead one on its port with its data.

    A thread rather than a task: restarts block for seconds (pg0 waits for the
    postmaster), and the server's event loop needs no part in it. Clients keep their
    DSN and URL; their pools reconnect by themselves.
    """

    def __init__(self, services: list[Service]) -> None:
        self._services = services
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="embedded-supervisor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop supervising, after a restart in progress has finished."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        states = [_State(up_since=time.monotonic()) for _ in self._services]
        while not self._stopping.wait(_CHECK_INTERVAL):
            for service, state in zip(self._services, states):
                if self._stopping.is_set():
                    return
                self._check(service, state)

    def _check(self, service: Service, state: _State) -> None:
        now = time.monotonic()
        if service.running():
            if state.up and now - state.up_since > _STABLE_AFTER:
                state.restarts = 0
            return
        if now < state.next_try:
            return
        if state.up:
            logger.warning("embedded %s died; restarting it", service.name)
            state.up = False
        try:
            service.restart()
        except Exception as error:  # any cause: the service must come back when it goes away
            # The first line names the cause; the log tails below it change with every try.
            cause = str(error).partition("\n")[0]
            if cause != state.last_error:
                logger.error("restarting embedded %s failed; retrying with backoff: %s", service.name, error)
                state.last_error = cause
        else:
            logger.info("embedded %s restarted", service.name)
            state.up, state.up_since, state.last_error = True, time.monotonic(), ""
        # Also after a success: a service that dies at once again is retried later each time.
        state.restarts += 1
        state.next_try = time.monotonic() + min(_MAX_BACKOFF, 2.0 ** (state.restarts - 1))
