"""Windows of neighbouring turns: what a short turn is indexed with besides itself.

A turn's window is the turn with up to `width` turns before and after it, taken from the
same session and the same visibility (scope, domain, agent), so a window never carries text
that a reader of the turn could not read. The fingerprint names the window's text and the
embedding model, so a window is rebuilt only when either changed.

A window's vector is first the mean of its turns' own vectors (no embedding work, so windows keep
up with any write rate) and later, when the embedder is idle, the embedding of its text, which
finds a little more (LoCoMo dev R@5 0.615 averaged against 0.638 embedded, measured when windows were first averaged).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from typing import NamedTuple

import numpy as np


@dataclass(frozen=True)
class LeasedSession:
    """A session whose windows one worker builds now; marked_at tells a later change from this one."""

    tenant_id: str
    session_id: str
    marked_at: datetime


class WindowBacklog(NamedTuple):
    sessions: int  # sessions whose windows are not built yet
    oldest_seconds: float  # how long the oldest of them has waited since its first write no window holds
    upgrades: int  # sessions whose averaged windows await an embedding of their text


@dataclass(frozen=True)
class SessionTurn:
    id: object
    group: tuple  # (scope, domain, agent_id): turns of one visibility share windows
    content: str
    fingerprint: str | None  # of the window it was last indexed with
    vector: np.ndarray | None = None  # the turn's own, for windows averaged rather than embedded
    occurred_at: datetime | None = None  # for the session digest's time span (core/write/digests.py)


@dataclass(frozen=True)
class Window:
    id: object
    text: str
    fingerprint: str
    alone: bool  # no neighbours: the turn's own vector serves
    members: tuple[SessionTurn, ...]
    replaces: str | None  # the fingerprint read with the turn; saving checks it is still there


def fingerprint(text: str, model: str) -> str:
    return hashlib.sha256(f"{model}\n{text}".encode()).hexdigest()[:32]


def averaged(window: Window) -> np.ndarray:
    """The mean of the members' own vectors: a window vector for no embedding work, a little less
    precise than embedding the window's text (MEMPLANE_CONTEXT_VECTORS)."""
    vectors = [t.vector for t in window.members if t.vector is not None]
    assert len(vectors) == len(window.members), "averaged only once every member has its vector"
    return np.mean(np.stack(vectors), axis=0).astype(np.float32)


def _windows(turns: list[SessionTurn], width: int):
    """Every turn with its window's members and text; `turns` in session order."""
    for _, members in groupby(turns, key=lambda t: t.group):
        run = list(members)
        for i, turn in enumerate(run):
            around = tuple(run[max(0, i - width): i + width + 1])
            yield turn, around, "\n".join(t.content for t in around)


def windows_to_build(turns: list[SessionTurn], width: int, model: str, *, also_current: str | None = None) -> list[Window]:
    """Windows whose text or model changed since they were indexed; `turns` in session order.
    `model` names how window vectors are made (the embedding model, and averaging if so); a window
    made the `also_current` way from the same text is up to date too (an upgraded one)."""
    out = []
    for turn, around, text in _windows(turns, width):
        mark = fingerprint(text, model)
        current = {mark, fingerprint(text, also_current)} if also_current else {mark}
        if turn.fingerprint not in current:
            out.append(Window(turn.id, text, mark, alone=len(around) == 1, members=around, replaces=turn.fingerprint))
    return out


def windows_to_upgrade(turns: list[SessionTurn], width: int, model: str, averaged_by: str) -> list[Window]:
    """Windows still as averaged (`averaged_by`) from the text they hold now, to be embedded by `model`.
    A window whose text changed since is left to the next build."""
    out = []
    for turn, around, text in _windows(turns, width):
        if turn.fingerprint == fingerprint(text, averaged_by):
            out.append(Window(turn.id, text, fingerprint(text, model), alone=len(around) == 1, members=around,
                              replaces=turn.fingerprint))
    return out
