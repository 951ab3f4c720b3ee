"""The Redis client every store uses: redis-py's, for one node or (a `redis+cluster://` URL) a Redis
Cluster, with a client span per command and per pipeline (redis-py has no tracing of its own).
Only the command's name is recorded, never keys or values, which hold tenant, session and API key
ids and working-memory text. On a cluster every script and MULTI runs on the slot its keys name:
each operation's keys share a hash tag (stores/redis/working.py, OPERATION_KEYS)."""
from __future__ import annotations

from typing import Any

import redis.asyncio as redis
from opentelemetry import trace
from opentelemetry.trace import SpanKind
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.asyncio.retry import Retry

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}

_tracer = trace.get_tracer("memplane.redis")


def _span(operation: str):
    return _tracer.start_as_current_span(
        f"redis {operation}", kind=SpanKind.CLIENT, attributes={"db.system": "redis", "db.operation": operation},
    )


class TracedPipeline(Pipeline):
    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        with _span("MULTI" if self.is_transaction else "PIPELINE"):
            return await super().execute(raise_on_error)


class TracedRedis(redis.Redis):
    async def execute_command(self, *args: Any, **options: Any) -> Any:
        with _span(str(args[0]).upper()):
            return await super().execute_command(*args, **options)

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> TracedPipeline:
        return TracedPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


class TracedClusterPipeline(ClusterPipeline):
    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> list[Any]:
        with _span("MULTI" if self._transaction else "PIPELINE"):
            return await super().execute(raise_on_error, allow_redirections)


class TracedRedisCluster(RedisCluster):
    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        with _span(str(args[0]).upper()):
            return await super().execute_command(*args, **kwargs)

    def pipeline(self, transaction: bool | None = None, shard_hint: Any = None) -> TracedClusterPipeline:
        # redis-py's command protocols declare _event_dispatcher, which its ClusterPipeline never sets.
        return TracedClusterPipeline(self, transaction)  # type: ignore[abstract]


def connect(url: str, *, timeout: float, retry: Retry | None = None) -> redis.Redis | RedisCluster:
    """A client for the URL: `redis+cluster://host:port` (or rediss+cluster) names one node of a
    cluster, from which the client learns the others and follows its slots and failovers."""
    options: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    if retry is not None:
        options["retry"] = retry
    scheme, sep, rest = url.partition("://")
    if scheme in CLUSTER_SCHEMES:
        return TracedRedisCluster.from_url(f"{CLUSTER_SCHEMES[scheme]}{sep}{rest}", **options)
    return TracedRedis.from_url(url, **options)
