"""Connection pool with the pgvector codec and the session settings every query relies on."""
from __future__ import annotations

import json
import time

import asyncpg
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from pgvector.asyncpg import register_vector

from .session import CUSTOM_PLANS

_tracer = trace.get_tracer("memplane.postgres")
# memories.embedding and context_embedding are vector(384) (migrations 0001 and 0004): every
# embedding model must give vectors of this size.
VECTOR_DIM = 384


def search_settings(ef_search: int) -> dict[str, str]:
    """Iterative scans keep filtered HNSW searches from returning too few rows when the caller's
    tenant is a small part of the table (pgvector >= 0.8); custom plans keep a statement run many
    times from settling on a generic plan that suits no tenant."""
    return {
        "hnsw.iterative_scan": "relaxed_order",
        "hnsw.ef_search": str(ef_search),
        "plan_cache_mode": CUSTOM_PLANS,
    }


class SearchConnection(asyncpg.Connection):
    """A connection that knows the search settings each caller's transaction sets again
    (stores/postgres/session.py): through a transaction-mode pooler the startup parameters never
    reach the server connection a transaction gets."""

    search_settings: dict[str, str] = {}


async def create_pool(dsn: str, *, size: int, ef_search: int, pooled: bool = False) -> asyncpg.Pool:
    """pooled: dsn is a transaction-mode pooler (PgBouncer), which keeps no prepared statement and
    refuses startup parameters it does not know."""
    async def init(conn: asyncpg.Connection) -> None:
        await register_vector(conn)
        await conn.set_type_codec("jsonb", encoder=_json_dumps, decoder=json.loads, schema="pg_catalog")
        conn.add_query_logger(_trace_statement)

    settings = search_settings(ef_search)
    # Startup parameters, not SET: they hold for the connection's life, whatever a release resets
    # (for what runs outside a caller's transaction: workers' sweeps, admin statements).
    on_connection = {"statement_cache_size": 0} if pooled else {"server_settings": settings}
    return await asyncpg.create_pool(
        dsn, min_size=1, max_size=size, init=init, command_timeout=60, reset=_nothing_to_reset,
        connection_class=type("PoolConnection", (SearchConnection,), {"search_settings": settings}), **on_connection,
    )


async def _nothing_to_reset(conn: asyncpg.Connection) -> None:
    """A released connection carries no session state to undo: the caller's role and settings are
    transaction-local (stores/postgres/session.py), advisory locks are transaction-level, and
    LISTEN and session locks use their own connections. asyncpg still rolls back an open
    transaction and drops listeners before calling this; its default reset (advisory unlock,
    CLOSE ALL, UNLISTEN, RESET ALL) was one more round trip on every use, seven per search."""


def _trace_statement(record: asyncpg.connection.LoggedQuery) -> None:
    """Each statement as a client span, a child of the span it ran in: asyncpg calls this soon after
    the statement, in a copy of its context, with the time it took. Only the statement's verb is
    recorded, never its text or arguments (which hold memory content and key hashes). Under a span
    that is not recorded (no exporter, or sampled out) none is made: a non-recording span per
    statement cost about 20 µs, a dozen times a search."""
    if not trace.get_current_span().is_recording():
        return
    end = time.time_ns()
    words = record.query.split(None, 1)
    verb = words[0].upper() if words else ""
    span = _tracer.start_span(
        f"postgresql {verb}", kind=SpanKind.CLIENT, start_time=end - int(record.elapsed * 1e9),
        attributes={"db.system": "postgresql", "db.operation": verb},
    )
    if record.exception is not None:
        span.set_status(Status(StatusCode.ERROR, type(record.exception).__name__))
    span.end(end_time=end)


def _json_dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def database_ping(pool: asyncpg.Pool):
    """A probe for the health service: one round trip on a pooled connection."""

    async def ping() -> None:
        await pool.fetchval("SELECT 1")

    return ping
