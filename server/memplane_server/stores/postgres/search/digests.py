"""SQL of session digests (migration 0022): the worker's save, as the owner across tenants like
the window builder, and the session channel's reads, under the caller's visibility."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg
import numpy as np

from ....core.access.caller import Caller
from ....core.model import MemoryFilter
from ....core.retrieval.tokens import tsquery_from_tokens
from ....core.write.digests import Digest, digest_keywords
from ...sealing import OPENERS
from ..session import caller_session
from ..sql import Params, visibility


@dataclass(frozen=True)
class DigestMatch:
    session_id: str
    digest: str
    score: float  # cosine similarity (vector) or ts_rank (keyword)


class DigestStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def common_terms(self, tenant_id: str) -> dict[str, float]:
        """The tenant's common keyword terms and the share of its rows holding each."""
        common = await self.pool.fetchval(
            "SELECT common FROM keyword_stats WHERE tenant_id = $1 AND field = 'keywords'", tenant_id)
        return {k: float(v) for k, v in (common or {}).items()}

    async def save(self, tenant_id: str, session_id: str, marked_at: datetime, digests: Sequence[Digest],
                   sealed_with: bytes | None = None) -> bool:
        """Replaces the session's digests, unless it was marked again since `marked_at` (a turn
        changed or was forgotten meanwhile: these digests may hold its old text). The queue row is
        locked first, so a forget marking the session waits for this, then drops what it saved
        (mp_mark_context, migration 0022)."""
        async with self.pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval(
                    "SELECT true FROM context_queue WHERE tenant_id = $1 AND session_id = $2 AND marked_at = $3"
                    " FOR UPDATE", tenant_id, session_id, marked_at):
                return False
            await conn.execute("DELETE FROM session_digests WHERE tenant_id = $1 AND session_id = $2",
                               tenant_id, session_id)
            await conn.executemany(
                "INSERT INTO session_digests (tenant_id, session_id, scope, domain, agent_id, keyphrases, entities,"
                " digest, keywords, embedding, turns, first_at, last_at, written_by, sealed_key)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, to_tsvector('simple', $9), $10, $11, $12, $13, $14, $15)",
                [(tenant_id, session_id, scope, domain or "", agent or "", list(d.keyphrases), list(d.entities),
                  _sealed(sealed_with, tenant_id, d.text), digest_keywords(d), d.vector, d.turns, d.first_at,
                  d.last_at, d.written_by, sealed_with)
                 for d in digests for scope, domain, agent in [d.group]],
            )
        return True

    @staticmethod
    def _where(caller: Caller, f: MemoryFilter, p: Params) -> str:
        where = [visibility(caller, p)]
        if f.session_id:
            where.append(f"m.session_id = {p.add(f.session_id)}")
        if f.scopes:
            where.append(f"m.scope = ANY({p.add([s.value for s in f.scopes])}::text[])")
        if f.domains:
            where.append(f"m.domain = ANY({p.add(list(f.domains))}::text[])")
        if f.agent_id:
            where.append(f"m.agent_id = {p.add(f.agent_id)}")
        return " AND ".join(where)

    async def nearest(self, caller: Caller, f: MemoryFilter, vector: np.ndarray, *, limit: int) -> list[DigestMatch]:
        """The readable digests nearest the query vector."""
        p = Params(vector)
        where = self._where(caller, f, p)
        async with caller_session(self.pool, caller) as conn:
            rows = await conn.fetch(
                f"SELECT m.tenant_id, m.session_id, m.digest, m.sealed_key, 1 - (m.embedding <=> $1) AS score"
                f" FROM session_digests m"
                f" WHERE m.embedding IS NOT NULL AND {where} ORDER BY m.embedding <=> $1 LIMIT {p.add(limit)}",
                *p.values)
        return [_match(r) for r in rows]

    async def matching(self, caller: Caller, f: MemoryFilter, terms: Sequence[str], *, limit: int) -> list[DigestMatch]:
        """The readable digests whose keyphrases or entities hold a query term, best ranked first."""
        if not terms:
            return []
        p = Params(tsquery_from_tokens(list(terms)))
        where = self._where(caller, f, p)
        async with caller_session(self.pool, caller) as conn:
            rows = await conn.fetch(
                f"SELECT m.tenant_id, m.session_id, m.digest, m.sealed_key, ts_rank(m.keywords, q) AS score"
                f" FROM session_digests m, to_tsquery('simple', $1) AS q"
                f" WHERE m.keywords @@ q AND {where} ORDER BY score DESC, m.last_at DESC NULLS LAST LIMIT {p.add(limit)}",
                *p.values)
        return [_match(r) for r in rows]


def _sealed(key: bytes | None, tenant_id: str, text: str) -> str:
    return OPENERS.seal_text(key, tenant_id, "digest", text) if key is not None else text


def _match(r: asyncpg.Record) -> DigestMatch:
    digest = OPENERS.open_text(r["sealed_key"], r["tenant_id"], "digest", r["digest"]) if r["sealed_key"] else r["digest"]
    return DigestMatch(r["session_id"], digest, float(r["score"]))
