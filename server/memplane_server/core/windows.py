"""Windows of neighbouring turns: what a short turn is indexed with besides itself.

A turn's window is the turn with up to `width` turns before and after it, taken from the
same session and the same visibility (scope, domain, agent), so a window never carries text
that a reader of the turn could not read. The fingerprint names the window's text and the
embedding model, so a window is rebuilt only when either changed.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby

import numpy as np


@dataclass(frozen=True)
class LeasedSession:
    """A session whose windows one worker builds now; marked_at tells a later change from this one."""

    tenant_id: str
    session_id: str
    marked_at: datetime


@dataclass(frozen=True)
class SessionTurn:
    id: object
    group: tuple  # (scope, domain, agent_id): turns of one visibility share windows
    content: str
    fingerprint: str | None  # of the window it was last indexed with
    vector: np.ndarray | None = None  # the turn's own, for windows averaged rather than embedded


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
    return np.mean(np.stack([t.vector for t in window.members]), axis=0).astype(np.float32)


def windows_to_build(turns: list[SessionTurn], width: int, model: str) -> list[Window]:
    """Windows whose text or model changed since they were indexed; `turns` in session order.
    `model` names how window vectors are made (the embedding model, and averaging if so)."""
    out = []
    for _, members in groupby(turns, key=lambda t: t.group):
        run = list(members)
        for i, turn in enumerate(run):
            around = run[max(0, i - width): i + width + 1]
            text = "\n".join(t.content for t in around)
            mark = fingerprint(text, model)
            if mark != turn.fingerprint:
                out.append(Window(turn.id, text, mark, alone=len(around) == 1, members=tuple(around),
                                  replaces=turn.fingerprint))
    return out
