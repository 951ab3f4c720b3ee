"""Signed-in visitors: one server-side session per sign-in, holding the API key it signed in with.

The browser gets only the session's random id (in a cookie the page's scripts cannot read). Sessions
live in this process's memory: a restarted panel asks everyone to sign in again, and a panel behind
a load balancer needs sticky sessions. A session idles out after IDLE_SECONDS without a request.
"""
from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

IDLE_SECONDS = 8 * 3600


@dataclass
class Session:
    id: str
    api_key: str = field(repr=False)
    agent_id: str
    # Synchronizer token: every state-changing form carries it, and a page of another site cannot
    # read it, so it cannot forge one.
    csrf_token: str = field(repr=False)
    last_seen: float

    @property
    def key_label(self) -> str:
        """The key's public id (`mpk_<id>_<secret>` without the secret), to show who is signed in."""
        prefix, _, rest = self.api_key.partition("_")
        key_id, _, _ = rest.partition("_")
        return f"{prefix}_{key_id}" if prefix == "mpk" and key_id else "key"


class SessionStore:
    def __init__(self, idle_seconds: float = IDLE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._sessions: dict[str, Session] = {}
        self._idle = idle_seconds
        self._clock = clock

    def create(self, api_key: str, agent_id: str) -> Session:
        self._prune()
        session = Session(
            id=secrets.token_urlsafe(32), api_key=api_key, agent_id=agent_id,
            csrf_token=secrets.token_urlsafe(32), last_seen=self._clock(),
        )
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of that id (its idle time restarting), or None."""
        session = self._sessions.get(session_id or "")
        if session is None:
            return None
        now = self._clock()
        if now - session.last_seen > self._idle:
            del self._sessions[session.id]
            return None
        session.last_seen = now
        return session

    def alive(self, session_id: str) -> bool:
        """Whether the session still exists, without counting this as activity (a live stream asks)."""
        session = self._sessions.get(session_id)
        return session is not None and self._clock() - session.last_seen <= self._idle

    def drop(self, session_id: str | None) -> None:
        self._sessions.pop(session_id or "", None)

    def _prune(self) -> None:
        now = self._clock()
        for session_id in [s.id for s in self._sessions.values() if now - s.last_seen > self._idle]:
            del self._sessions[session_id]
