"""The statement of the lexical search channels (keyword over a memory's tokens or its turn
window's, exact over the structured facts' stored keys): all of a search's in one, BM25 included.
As three (the keyword matches, the facts, then the rows BM25 chose in a thread) they were three
round trips and a thread hop, each waiting for a core the query's embedding held."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from ....core.access.caller import Caller
from ....core.model import MemoryFilter, Scored
from ....core.retrieval.time_expressions import TimeRange
from ....core.retrieval.tokens import tsquery_from_tokens
from ..sql import WHOLE, Params, RowShape, filter_clauses, ranked_select, visibility
from .plans import search_rows

# The keyword match ranks at most about this many rows per candidate read back: at 100,000 memories
# a term under the common share matched up to 5,000 rows, all ranked to keep 200 (migration 0027).
MATCHES_PER_CANDIDATE = 5
# BM25's constants: term frequency saturation and length normalisation (the usual values).
K1 = 1.2
B = 0.75


@dataclass(frozen=True)
class KeywordQuery:
    """Memories whose tokens (or, windows, turn window's tokens) hold a term: the best `pool` by
    SQL rank are scored by BM25 over their own term statistics, and the best `limit` of those that
    share a term with the query are answered. Terms in more than common_share of the tenant's rows
    do not make a row match (none does when all terms are that common), but still count in the
    rank; of the others, the rarest join the match while their expected matches stay within
    MATCHES_PER_CANDIDATE * pool (migration 0027). A term's weight (default 1) multiplies its part
    of the score."""

    filter: MemoryFilter
    terms: Sequence[str]
    pool: int
    as_of: datetime | None
    limit: int
    weights: Mapping[str, float] | None = None
    windows: bool = False
    common_share: float = 1.0
    lead: int = 0  # in a leading shape, the answered rows read whole (sql.RowShape)


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


def _keyword_select(caller: Caller, q: KeywordQuery, shape: RowShape, p: Params, index: int) -> str:
    column = "m.context_keywords" if q.windows else "m.keywords"
    distinct = list(dict.fromkeys(q.terms))
    terms = p.add(distinct)
    weights = p.add([(q.weights or {}).get(t, 1.0) for t in distinct])
    # The matching rows come from mp_keyword_matches (migration 0013), which can use its index
    # where `@@` under row-level security cannot; they are read back here under the policy.
    matches = (f"mp_keyword_matches({terms}::text[], to_tsquery('simple', {p.add(tsquery_from_tokens(list(q.terms)))}),"
               f" {p.add(q.windows)}, {p.add(q.common_share)}::real, {p.add(MATCHES_PER_CANDIDATE * q.pool)}::int)")
    where = [visibility(caller, p), *filter_clauses(q.filter, p, as_of=q.as_of)]
    # Sorted by the rank the function gives, its rows are read back one by one only until `pool`
    # of them pass the caller's filters (numbered in a wrap that leaves that plan as it is). BM25
    # needs of a row only the counts of the query's terms and of all its tokens: counted here.
    pool = (f"SELECT x.*, row_number() OVER () AS place FROM (SELECT m.tenant_id, m.id, t.length, t.lexemes, t.counts"
            f" FROM (SELECT * FROM {matches} ORDER BY rank DESC, created_at DESC) AS k"
            f" JOIN memories m ON m.tenant_id = k.tenant_id AND m.id = k.id"
            f" CROSS JOIN LATERAL (SELECT coalesce(sum(greatest(cardinality(u.positions), 1)), 0)::float8 AS length,"
            f" array_agg(u.lexeme) FILTER (WHERE u.lexeme = ANY({terms}::text[])) AS lexemes,"
            f" array_agg(greatest(cardinality(u.positions), 1)::float8) FILTER (WHERE u.lexeme = ANY({terms}::text[]))"
            f" AS counts FROM unnest({column}) AS u) AS t"
            f" WHERE {' AND '.join(where)}"
            f" ORDER BY k.rank DESC, k.created_at DESC LIMIT {p.add(q.pool)}) AS x")
    # BM25 with the term statistics of the pool itself: a word every candidate shares (a speaker's
    # name in every turn of a conversation) then counts for little, and the rare word the question
    # is really about for much. Scored in the statement, the answered rows are read in it too.
    k1, b = p.add(K1), p.add(B)
    lead = f"c.n <= {p.add(q.lead)}" if q.lead > 0 else "FALSE"
    return (f"WITH pool AS ({pool}),"
            f" stats AS (SELECT count(*)::float8 AS n, CASE WHEN sum(length) > 0 THEN sum(length) / count(*)::float8"
            f" ELSE 1.0::float8 END AS average FROM pool),"
            f" idf AS (SELECT u.lexeme, ln(1 + (s.n - count(*)::float8 + 0.5) / (count(*)::float8 + 0.5)) * w.weight AS idf"
            f" FROM pool CROSS JOIN LATERAL unnest(pool.lexemes) AS u(lexeme)"
            f" JOIN unnest({terms}::text[], {weights}::float8[]) AS w(lexeme, weight) ON w.lexeme = u.lexeme"
            f" CROSS JOIN stats s GROUP BY u.lexeme, w.weight, s.n),"
            f" scored AS (SELECT pool.tenant_id, pool.id, pool.place,"
            f" sum(i.idf * x.c * ({k1}::float8 + 1) / (x.c + {k1}::float8 * (1 - {b}::float8 + {b}::float8 * pool.length"
            f" / s.average))) AS score"
            f" FROM pool CROSS JOIN stats s CROSS JOIN LATERAL unnest(pool.lexemes, pool.counts) AS x(lexeme, c)"
            f" JOIN idf i ON i.lexeme = x.lexeme GROUP BY pool.tenant_id, pool.id, pool.place)"
            f" SELECT {shape.select(lead)}, c.score, {index} AS query FROM (SELECT scored.*,"
            f" row_number() OVER (ORDER BY scored.score DESC, scored.place) AS n FROM scored WHERE scored.score > 0"
            f" ORDER BY scored.score DESC, scored.place LIMIT {p.add(q.limit)}) AS c"
            f" JOIN memories m ON m.tenant_id = c.tenant_id AND m.id = c.id ORDER BY c.n")


def _fact_select(caller: Caller, q: FactQuery, shape: RowShape, p: Params, index: int) -> str:
    # The stored lowercase keys (migration 0013), not lower(): an index on them serves under RLS.
    names = p.add(list(q.names))
    where = [visibility(caller, p), *filter_clauses(q.filter, p, as_of=q.as_of), "m.entity_key IS NOT NULL",
             f"(m.entity_key = ANY({names}::text[]) OR m.attribute_key = ANY({names}::text[]))"]
    if q.valid is not None:
        where.append(f"coalesce(m.valid_from, m.occurred_at) < {p.add(q.valid.end)}")
        where.append(f"(m.valid_to IS NULL OR m.valid_to > {p.add(q.valid.start)})")
    rest = (f"FROM memories m WHERE {' AND '.join(where)}"
            f" ORDER BY score DESC, m.valid_from DESC NULLS LAST, m.created_at DESC LIMIT {p.add(q.limit)}")
    score = (f"((m.entity_key = ANY({names}::text[]))::int"
             f" + (coalesce(m.attribute_key = ANY({names}::text[]), false))::int)::float8")
    return ranked_select(shape, p, lead=q.lead, limit=q.limit, score=score, name="score", rest=rest,
                         extra=f", {index} AS query")


async def lexical(conn: asyncpg.Connection, caller: Caller, queries: Sequence[LexicalQuery],
                  shape: RowShape = WHOLE) -> list[list[Scored]]:
    """Each query's memories, all in one statement (in a leading shape whole for each query's
    first): a search paid a round trip for each of its keyword matches, its facts and the rows its
    keyword channels chose, and a thread hop to order the matches between them."""
    if not queries:
        return []
    p = Params()
    parts = [_keyword_select(caller, q, shape, p, n) if isinstance(q, KeywordQuery)
             else _fact_select(caller, q, shape, p, n) for n, q in enumerate(queries)]
    found: list[list[Scored]] = [[] for _ in queries]
    for r in await search_rows(conn, " UNION ALL ".join(f"({part})" for part in parts), *p.values):
        found[r["query"]].append(Scored(shape.build(r), r["score"], shape.whole(r)))
    return found
