"""The statements of the lexical search channels (keyword over a memory's tokens or its turn
window's, exact over the structured facts' stored keys), run together in one session: a search
paid BEGIN, the caller's settings and COMMIT for each of its three, and their fourteen round trips
competed for the CPU with the query's embedding, which runs meanwhile."""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from ....core.access.caller import Caller
from ....core.model import MemoryFilter, Scored
from ....core.retrieval.bm25 import KeywordMatch
from ....core.retrieval.time_expressions import TimeRange
from ....core.retrieval.tokens import tsquery_from_tokens
from ..sql import WHOLE, Params, RowShape, filter_clauses, ranked_select, visibility
from .plans import search_rows

# The keyword match ranks at most about this many rows per candidate read back: at 100,000 memories
# a term under the common share matched up to 5,000 rows, all ranked to keep 200 (migration 0027).
MATCHES_PER_CANDIDATE = 5


@dataclass(frozen=True)
class KeywordQuery:
    """Memories whose tokens (or, windows, turn window's tokens) hold a term: the best `pool` by
    SQL rank are read with their tokens only, `choose` orders and cuts them (BM25), and only the
    chosen are read whole. Terms in more than common_share of the tenant's rows do not make a row
    match (none does when all terms are that common), but still count in the rank; of the others,
    the rarest join the match while their expected matches stay within MATCHES_PER_CANDIDATE * pool
    (migration 0027)."""

    filter: MemoryFilter
    terms: Sequence[str]
    pool: int
    as_of: datetime | None
    choose: Callable[[list[KeywordMatch]], list[KeywordMatch]]
    windows: bool = False
    common_share: float = 1.0
    lead: int = 0  # in a leading shape, the chosen rows read whole (sql.RowShape)


@dataclass(frozen=True)
class FactQuery:
    """Structured facts whose entity or attribute is one of the names (lowercase), and (valid) that
    held at some time in the range; facts naming both first, then the newest. The score is how
    many of the two matched."""

    filter: MemoryFilter
    names: Sequence[str]
    limit: int
    as_of: datetime | None
    valid: TimeRange | None = None
    lead: int = 0  # as for KeywordQuery


LexicalQuery = KeywordQuery | FactQuery


def _keyword_select(caller: Caller, q: KeywordQuery, p: Params, index: int) -> str:
    column = "m.context_keywords" if q.windows else "m.keywords"
    terms = p.add(list(dict.fromkeys(q.terms)))
    # The matching rows come from mp_keyword_matches (migration 0013), which can use its index
    # where `@@` under row-level security cannot; they are read back here under the policy.
    matches = (f"mp_keyword_matches({terms}::text[], to_tsquery('simple', {p.add(tsquery_from_tokens(list(q.terms)))}),"
               f" {p.add(q.windows)}, {p.add(q.common_share)}::real, {p.add(MATCHES_PER_CANDIDATE * q.pool)}::int)")
    where = [visibility(caller, p), *filter_clauses(q.filter, p, as_of=q.as_of)]
    # Sorted by the rank the function gives, its rows are read back one by one only until `pool`
    # of them pass the caller's filters. BM25 needs of a row only the counts of the query's terms
    # and of all its tokens: counted here, the whole token list is neither sent nor parsed
    # (parsing 200 windows' lists was the most CPU of a search in Python).
    return (f"SELECT m.id, k.rank, t.length, t.lexemes, t.counts, {index} AS query"
            f" FROM (SELECT * FROM {matches} ORDER BY rank DESC, created_at DESC) AS k"
            f" JOIN memories m ON m.tenant_id = k.tenant_id AND m.id = k.id"
            f" CROSS JOIN LATERAL (SELECT sum(greatest(cardinality(u.positions), 1))::int AS length,"
            f" array_agg(u.lexeme) FILTER (WHERE u.lexeme = ANY({terms}::text[])) AS lexemes,"
            f" array_agg(greatest(cardinality(u.positions), 1)) FILTER (WHERE u.lexeme = ANY({terms}::text[])) AS counts"
            f" FROM unnest({column}) AS u) AS t"
            f" WHERE {' AND '.join(where)}"
            f" ORDER BY k.rank DESC, k.created_at DESC LIMIT {p.add(q.pool)}")


def _fact_select(caller: Caller, q: FactQuery, shape: RowShape) -> tuple[str, Params]:
    # The stored lowercase keys (migration 0013), not lower(): an index on them serves under RLS.
    p = Params(list(q.names))
    where = [visibility(caller, p), *filter_clauses(q.filter, p, as_of=q.as_of), "m.entity_key IS NOT NULL",
             "(m.entity_key = ANY($1::text[]) OR m.attribute_key = ANY($1::text[]))"]
    if q.valid is not None:
        where.append(f"coalesce(m.valid_from, m.occurred_at) < {p.add(q.valid.end)}")
        where.append(f"(m.valid_to IS NULL OR m.valid_to > {p.add(q.valid.start)})")
    rest = (f"FROM memories m WHERE {' AND '.join(where)}"
            f" ORDER BY matched DESC, m.valid_from DESC NULLS LAST, m.created_at DESC LIMIT {p.add(q.limit)}")
    score = "(m.entity_key = ANY($1::text[]))::int + (coalesce(m.attribute_key = ANY($1::text[]), false))::int"
    return ranked_select(shape, p, lead=q.lead, limit=q.limit, score=score, name="matched", rest=rest), p


async def lexical(conn: asyncpg.Connection, caller: Caller, queries: Sequence[LexicalQuery],
                  shape: RowShape = WHOLE) -> list[list[Scored]]:
    """Each query's memories, in one session: the keyword queries' matches as one statement, the
    facts' statements while BM25 orders the matches (in a thread: CPU work), then the records the
    keyword queries chose, read at once (a memory two of them chose is read once; in a leading shape
    whole for what each query chose first)."""
    found: list[list[Scored]] = [[] for _ in queries]
    keyword = [(i, q) for i, q in enumerate(queries) if isinstance(q, KeywordQuery)]
    chosen_by_query: asyncio.Future[list[list[KeywordMatch]]] | None = None
    if keyword:
        p = Params()
        rows = await search_rows(
            conn, " UNION ALL ".join(f"({_keyword_select(caller, q, p, n)})" for n, (_, q) in enumerate(keyword)),
            *p.values)
        matches: list[list[KeywordMatch]] = [[] for _ in keyword]
        for r in rows:
            matches[r["query"]].append(
                KeywordMatch(r["id"], float(r["rank"]), dict(zip(r["lexemes"] or (), r["counts"] or ())), r["length"] or 0))
        chosen_by_query = asyncio.ensure_future(asyncio.to_thread(
            lambda: [q.choose(m) for (_, q), m in zip(keyword, matches)]))
    try:
        for i, q in enumerate(queries):
            if isinstance(q, FactQuery):
                sql, p = _fact_select(caller, q, shape)
                found[i] = [Scored(shape.build(r), float(r["matched"]), shape.whole(r))
                            for r in await search_rows(conn, sql, *p.values)]
    except BaseException:
        if chosen_by_query is not None:
            chosen_by_query.cancel()  # its thread ends on its own; the answer is dropped
        raise
    chosen = await chosen_by_query if chosen_by_query is not None else []
    ids = list(dict.fromkeys(m.id for choice in chosen for m in choice))
    if not ids:
        return found
    p = Params(ids)
    columns = shape.columns
    if shape.leads:
        first = {m.id: None for (_, q), choice in zip(keyword, chosen) for m in choice[:q.lead]}
        columns = shape.select(f"m.id = ANY({p.add(list(first))}::uuid[])")
    by_id = {r["id"]: r for r in await search_rows(
        conn, f"SELECT {columns} FROM memories m WHERE m.id = ANY($1::uuid[]) AND {visibility(caller, p)}",
        *p.values)}
    records = {memory_id: shape.build(r) for memory_id, r in by_id.items()}
    for (i, _), choice in zip(keyword, chosen):
        found[i] = [Scored(records[m.id], m.score, shape.whole(by_id[m.id])) for m in choice if m.id in by_id]
    return found
