"""Which dependency an exception says is unreachable, so callers get UNAVAILABLE (retryable)
instead of INTERNAL, and whether a transaction lost to a concurrent one (ABORTED, retryable): the
drivers' own error types stay inside stores/."""
from __future__ import annotations

import asyncio

import asyncpg
import redis.exceptions

POSTGRES = "postgres"
REDIS = "redis"

_POSTGRES_ERRORS = (
    asyncpg.PostgresConnectionError,  # the connection broke or was refused
    asyncpg.exceptions.OperatorInterventionError,  # shutting down, starting up, crash recovery
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.InterfaceError,  # "connection is closed" after the server went away
    # A pooled connection whose server died mid-query can be handed out once more in a broken
    # protocol state ("cannot switch to state 15"): seen only while the database was killed.
    asyncpg.exceptions._base.InternalClientError,
)
_REDIS_ERRORS = (
    redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
    # A Redis Cluster while a failover moves slots: down, a slot with no master yet, or "try again".
    redis.exceptions.ClusterError, redis.exceptions.TryAgainError, redis.exceptions.SlotNotCoveredError,
)
# PostgreSQL rolled the whole transaction back so that a concurrent one could go on: nothing of it
# was kept, and the same call sent again normally succeeds.
_CONTENTION_ERRORS = (asyncpg.exceptions.DeadlockDetectedError, asyncpg.exceptions.SerializationError)


def outage_of(exc: BaseException) -> str | None:
    """POSTGRES or REDIS when exc (or what caused it) is a lost or refused dependency, else None."""
    seen = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _REDIS_ERRORS):
            return REDIS
        if isinstance(current, _POSTGRES_ERRORS):
            return POSTGRES
        # asyncpg raises the socket's own errors when it cannot connect at all.
        if isinstance(current, (ConnectionError, asyncio.TimeoutError)) and _raised_by_asyncpg(current):
            return POSTGRES
        current = current.__cause__ or current.__context__
    return None


def lost_to_concurrency(exc: BaseException) -> bool:
    """Whether exc (or what caused it) is a transaction PostgreSQL aborted for a concurrent one."""
    seen = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _CONTENTION_ERRORS):
            return True
        current = current.__cause__ or current.__context__
    return False


def _raised_by_asyncpg(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__", "").startswith("asyncpg"):
            return True
        tb = tb.tb_next
    return False
