"""Caller-scoped transactions: the restricted role plus the caller in transaction-local settings,
so row-level security enforces visibility even if a query's own predicate were wrong."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from ...core.caller import Caller

APP_ROLE = "memplane_app"


# The connections' own mode (stores/postgres/pool.py): every statement planned for its parameters.
CUSTOM_PLANS = "force_custom_plan"
# PostgreSQL's default, for statements whose best plan does not depend on the tenant: after five runs
# of a statement a connection reuses its generic plan when that costs no more than the custom ones did.
REUSED_PLANS = "auto"


@asynccontextmanager
async def caller_session(pool: asyncpg.Pool, caller: Caller, *, plans: str = CUSTOM_PLANS
                         ) -> AsyncIterator[asyncpg.Connection]:
    async with pool.acquire() as conn, conn.transaction():
        # Everything a caller's statements rely on is set here, transaction-local: nothing rides on
        # the connection, so a transaction-mode pooler may hand each transaction any server.
        search = conn.search_settings  # stores/postgres/pool.py
        await conn.execute(
            "SELECT set_config('role', $1, true), set_config('memplane.tenant_id', $2, true),"
            " set_config('memplane.agent_id', $3, true), set_config('memplane.read_domains', $4, true),"
            " set_config('memplane.write_domains', $5, true), set_config('plan_cache_mode', $6, true),"
            " set_config('hnsw.iterative_scan', $7, true), set_config('hnsw.ef_search', $8, true)",
            APP_ROLE,
            caller.tenant_id or "",
            caller.agent_id or "",
            ",".join(sorted(caller.domains)),
            ",".join(sorted(d for d, can_write in caller.domains.items() if can_write)),
            plans,
            search["hnsw.iterative_scan"],
            search["hnsw.ef_search"],
        )
        yield conn
