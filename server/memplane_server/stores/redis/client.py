"""The Redis client every store uses: redis-py's, with a client span per command and per pipeline
(redis-py has no tracing of its own). Only the command's name is recorded, never keys or values,
which hold tenant, session and API key ids and working-memory text."""
from __future__ import annotations

from typing import Any

import redis.asyncio as redis
from opentelemetry import trace
from opentelemetry.trace import SpanKind
from redis.asyncio.client import Pipeline

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
