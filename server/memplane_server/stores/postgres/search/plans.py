"""Search statements and the plans they ran: `search_rows` runs one as the caller's session does,
and inside `explaining()` also collects its EXPLAIN (and that of the statements in functions it
calls, from auto_explain), for the benchmarks and the plan tests; `parse_tsvector` reads a
tsvector's text form."""
from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import asyncpg

_TSVECTOR_ENTRY = re.compile(r"'((?:[^']|'')*)'(?::([\d,]+))?")


# Plans of the search statements run inside explaining(), for benchmarks and tests.
_explained: ContextVar[list[str] | None] = ContextVar("explained", default=None)


@contextmanager
def explaining() -> Iterator[list[str]]:
    """Collects EXPLAIN (ANALYZE, BUFFERS) of every search channel statement run inside it in the
    caller's session (role, settings and row-level security as the server runs them), followed by
    the plans of the statements run inside functions when the session user may load auto_explain
    (a superuser: benchmarks and tests); each statement then runs once more for its rows."""
    plans: list[str] = []
    token = _explained.set(plans)
    try:
        yield plans
    finally:
        _explained.reset(token)


async def search_rows(conn: asyncpg.Connection, sql: str, *params: Any) -> list[asyncpg.Record]:
    plans = _explained.get()
    if plans is not None:
        notices: list[str] = []

        def listen(_conn: asyncpg.Connection, message: asyncpg.PostgresLogMessage) -> None:
            notices.append(message.message)

        nested = await _log_nested_plans(conn)
        conn.add_log_listener(listen)
        try:
            rows = await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", *params)
            await asyncio.sleep(0)  # log listeners are called soon after the statement, not during it
        finally:
            conn.remove_log_listener(listen)
        inner = [n for n in notices if nested and sql not in n]
        plans.append("\n".join([*(r[0] for r in rows), *(f"-- inside a function: {n}" for n in inner)]))
    return await conn.fetch(sql, *params)


async def _log_nested_plans(conn: asyncpg.Connection) -> bool:
    """auto_explain for statements inside functions (a SECURITY DEFINER function's plan is not in
    EXPLAIN's), sent to this client as notices, for this transaction; its settings and LOAD need a
    superuser, so the role is reset for them and set again."""
    role = await conn.fetchval("SELECT current_user")
    try:
        async with conn.transaction():
            await conn.execute("RESET ROLE")
            await conn.execute("LOAD 'auto_explain'")
            await conn.execute(
                "SELECT set_config('auto_explain.log_min_duration', '0', true),"
                " set_config('auto_explain.log_nested_statements', 'on', true),"
                " set_config('auto_explain.log_analyze', 'on', true),"
                " set_config('auto_explain.log_buffers', 'on', true),"
                " set_config('auto_explain.log_level', 'notice', true), set_config('role', $1, true)",
                role,
            )
    except asyncpg.PostgresError:  # not a superuser: the top-level plan alone
        return False
    return True


def parse_tsvector(text: str) -> dict[str, int]:
    """`'camp':3 'carolin':1,5` -> {"camp": 1, "carolin": 2}."""
    return {m.group(1): len(m.group(2).split(",")) if m.group(2) else 1 for m in _TSVECTOR_ENTRY.finditer(text)}
