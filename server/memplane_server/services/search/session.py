"""The session channel of Search: the session digests (core/write/digests.py) are
searched first, by vector and by keyword, to pick the few sessions worth looking into
(MEMPLANE_SESSION_TOP_SESSIONS); then the turns within them, by vector, under the search's own
filters. A question about "what happened around the move" reaches the session before the turn."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from ...core.access.caller import Caller
from ...core.model import Kind, Layer, MemoryFilter, Scored, SearchHit
from ...core.retrieval.fusion import reciprocal_rank_fusion
from ...stores.postgres.memories import MemoryStore
from ...stores.postgres.search.digests import DigestStore

CHANNEL = "session"
DIGEST_POOL = 20  # digests read per match kind before the sessions are chosen
EXPLAIN_CHARS = 160


@dataclass(frozen=True)
class SessionResult:
    scored: list[Scored]
    why: dict[str, str]  # memory id -> the session and digest that led to it, for the explanation


def choose_sessions(by_vector: list[str], by_keyword: list[str], top: int) -> list[str]:
    """The sessions both rankings of digests put first, fused as the channels are."""
    fused = reciprocal_rank_fusion({"vector": by_vector, "keyword": by_keyword}, {"vector": 1.0, "keyword": 1.0})
    return [s for s, _ in sorted(fused.items(), key=lambda kv: -kv[1][0])][:top]


def merge_turns(per_session: list[list[Scored]], limit: int) -> list[Scored]:
    """The chosen sessions' turns by their own similarity to the query (a turn read through two
    digests of its session counted once)."""
    seen, out = set(), []
    for s in sorted((s for found in per_session for s in found), key=lambda s: -s.score):
        if s.record.id not in seen:
            seen.add(s.record.id)
            out.append(s)
    return out[:limit]


class SessionChannel:
    def __init__(self, digests: DigestStore, memories: MemoryStore, *, weight: float, top_sessions: int) -> None:
        self.digests, self.memories = digests, memories
        self.weight, self.top_sessions = weight, top_sessions

    @property
    def enabled(self) -> bool:
        return self.weight > 0

    @staticmethod
    def applies(f: MemoryFilter) -> bool:
        """Digests hold turns: a filter that excludes them finds nothing here."""
        return (not f.kinds or Kind.TURN in f.kinds) and (not f.layers or Layer.EPISODIC in f.layers)

    async def search(self, caller: Caller, f: MemoryFilter, vector: np.ndarray, terms: list[str], *,
                     limit: int, as_of: datetime | None) -> SessionResult:
        if not self.applies(f):
            return SessionResult([], {})
        near, matching = await asyncio.gather(
            self.digests.nearest(caller, f, vector, limit=DIGEST_POOL),
            self.digests.matching(caller, f, terms, limit=DIGEST_POOL))
        chosen = choose_sessions([m.session_id for m in near], [m.session_id for m in matching], self.top_sessions)
        if not chosen:
            return SessionResult([], {})
        digests = {m.session_id: m.digest for m in [*matching, *near]}
        found = await asyncio.gather(*(
            self.memories.vector_search(caller, replace(f, session_id=session), vector, limit=limit, as_of=as_of)
            for session in chosen))
        scored = merge_turns(list(found), limit)
        place = {session: i for i, session in enumerate(chosen, 1)}
        why = {}
        for s in scored:
            session = s.record.session_id
            assert session is not None, "read by its session's filter"
            why[str(s.record.id)] = (f"session {session!r} (#{place[session]}), digest "
                                     f"{' '.join(digests.get(session, '').split())[:EXPLAIN_CHARS]!r}")
        return SessionResult(scored, why)


def explain_sessions(hits: list[SearchHit], why: dict[str, str]) -> None:
    """The session component of each hit's explanation names the session and digest that led to it."""
    for hit in hits:
        if (reason := why.get(str(hit.memory.id))) is not None:
            hit.explanation[:] = [replace(c, detail=f"{c.detail}: {reason}") if c.name == CHANNEL else c
                                  for c in hit.explanation]
