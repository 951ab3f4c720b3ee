"""Interceptors: error mapping, API-key authentication, idempotency and per-RPC metrics."""
from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from opentelemetry import metrics

from ..core.access.attribution import reset_work_tenant, set_work_tenant, work_tenant
from ..core.access.caller import Caller
from ..core.access.requests import request_key
from ..core.errors import Code, MemplaneError
from ..core.metering import CALLS, UsageTally
from ..core.validation import MAX_REQUEST_ID_BYTES, check_text
from ..logs import OncePerCause, cause_of
from ..services.access.auth import Authenticator
from ..services.access.availability import Availability
from ..services.access.idempotency import Idempotency
from ..services.access.rate_limits import RateLimits
from ..services.access.read_routing import ReadRouting
from .context import (
    current_caller,
    reset_caller,
    reset_reauthorize,
    reset_request_key,
    set_caller,
    set_reauthorize,
    set_request_key,
)
from .convert import write_recorded_whole
from .drain import Drain

log = logging.getLogger(__name__)

ERROR_DOMAIN = "memplane.dev"
PUBLIC_PREFIXES = ("/grpc.health.v1.", "/grpc.reflection.")
IDEMPOTENT_METHODS = frozenset(
    {
        "/memplane.v1.MemoryService/Write",
        "/memplane.v1.MemoryService/Forget",
        "/memplane.v1.MemoryService/UpdateMemory",
        "/memplane.v1.MemoryService/Reflect",
        "/memplane.v1.MemoryService/CloseSession",
    }
)

# Calls that change no memory (a search's usage counters aside): their rate check runs beside them.
READ_METHODS = frozenset(
    f"/memplane.v1.MemoryService/{name}"
    for name in ("Search", "GetMemory", "ListMemories", "ListMemoryHistory", "GetWorkingMemory", "GetStats")
)

Behavior = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]
# A server-streaming RPC (Watch): an async generator of responses.
StreamBehavior = Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]


class CallInterceptor(grpc.aio.ServerInterceptor):
    """One step around the server's RPCs. What every step needs is done here once: passing by the
    public methods (health checks, reflection) unless the step is `public`, the methods it `takes`,
    and wrapping a unary call (`around_unary`) or a server stream (`around_stream`) in a handler of
    the same kind, with the request parser and the response serializer the step may replace."""

    public = False

    def takes(self, method: str) -> bool:
        return True

    def request_deserializer(self, parse: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
        return parse

    def response_serializer(self, serialize: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
        return serialize

    async def around_unary(self, behavior: Behavior, request: Any, context: grpc.aio.ServicerContext,
                           details: grpc.HandlerCallDetails) -> Any:
        return await behavior(request, context)

    async def around_stream(self, behavior: StreamBehavior, request: Any, context: grpc.aio.ServicerContext,
                            details: grpc.HandlerCallDetails) -> AsyncIterator[Any]:
        async for response in behavior(request, context):
            yield response

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        method = details.method
        if handler is None or (not self.public and method.startswith(PUBLIC_PREFIXES)) or not self.takes(method):
            return handler
        parse = self.request_deserializer(handler.request_deserializer)
        if handler.unary_stream is not None:
            streamed = handler.unary_stream

            async def stream(request, context):
                async for response in self.around_stream(streamed, request, context, details):
                    yield response

            return grpc.unary_stream_rpc_method_handler(
                stream, request_deserializer=parse, response_serializer=handler.response_serializer)
        if handler.unary_unary is not None:
            called = handler.unary_unary

            async def unary(request, context):
                return await self.around_unary(called, request, context, details)

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=parse, response_serializer=self.response_serializer(handler.response_serializer))
        return handler


# An error may quote what the caller sent (a detector's name, a field path). Quoted whole, a long
# input made the status larger than a client accepts in its trailers (RESOURCE_EXHAUSTED there
# instead of the error), so every message and ErrorInfo value keeps at most a prefix of each word
# and of the whole; the limits keep the trailers (the message twice, once in base64) within 8 KiB.
_MAX_WORD_CHARS = 64
_MAX_TEXT_BYTES = 512
_LONG_WORD = re.compile(rf"\S{{{_MAX_WORD_CHARS + 1},}}")
_CUT = "…"


def bounded(text: str) -> str:
    """`text` with every run of more than 64 non-space characters cut to its first 64, and the whole
    cut to 512 bytes of UTF-8; a cut is marked by an ellipsis."""
    text = _LONG_WORD.sub(lambda m: m.group()[:_MAX_WORD_CHARS] + _CUT, text)
    encoded = text.encode()
    if len(encoded) <= _MAX_TEXT_BYTES:
        return text
    return encoded[:_MAX_TEXT_BYTES - len(_CUT.encode())].decode(errors="ignore") + _CUT


def to_status(error: MemplaneError) -> grpc.Status:
    metadata = {key: bounded(value) for key, value in error.metadata.items()}
    details = [error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=metadata)]
    if error.retry_after is not None:
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromMilliseconds(max(1, round(error.retry_after * 1000)))
        details.append(retry)
    packed = []
    for message in details:
        any_detail = any_pb2.Any()
        any_detail.Pack(message)
        packed.append(any_detail)
    status = status_pb2.Status(code=getattr(code_pb2, error.code.value), message=bounded(error.message), details=packed)
    return rpc_status.to_status(status)


class _Malformed:
    """Stands in for a request whose bytes did not parse (e.g. invalid UTF-8 in a string)."""

    def __init__(self, error: Exception) -> None:
        self.error = error


class ErrorInterceptor(CallInterceptor):
    """Maps MemplaneError to google.rpc.Status with ErrorInfo; a dependency outage becomes
    UNAVAILABLE (retryable), anything else INTERNAL, logged once per cause. A request that does
    not parse is INVALID_ARGUMENT, not gRPC's default INTERNAL."""

    public = True

    def __init__(self, availability: Availability) -> None:
        self.availability = availability
        self._log = OncePerCause(log)

    async def _fail(self, exc: Exception, context: grpc.aio.ServicerContext, method: str) -> None:
        if isinstance(exc, MemplaneError):
            await context.abort_with_status(to_status(exc))
        outage = self.availability.transient_error(exc)
        if outage is None:
            self._log.log(cause_of(exc), "unhandled error in %s", method)
            outage = MemplaneError(Code.INTERNAL, "INTERNAL", "internal error; it has been logged")
        await context.abort_with_status(to_status(outage))

    def request_deserializer(self, parse: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
        def tolerant_parse(data: bytes):
            try:
                return parse(data)
            except DecodeError as exc:
                return _Malformed(exc)

        return tolerant_parse

    async def around_unary(self, behavior, request, context, details):
        try:
            _refuse_malformed(request)
            return await behavior(request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await self._fail(exc, context, details.method)

    async def around_stream(self, behavior, request, context, details):
        try:
            _refuse_malformed(request)
            async for response in behavior(request, context):
                yield response
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await self._fail(exc, context, details.method)


def _refuse_malformed(request: Any) -> None:
    if isinstance(request, _Malformed):
        raise MemplaneError(Code.INVALID_ARGUMENT, "MALFORMED_REQUEST",
                            "the request is not a valid protobuf message (strings must be valid UTF-8)")


class DrainInterceptor(CallInterceptor):
    """Counts calls in flight for the shutdown drain; while draining, new calls are UNAVAILABLE
    (the client retries them elsewhere) and health checks still answer NOT_SERVING."""

    def __init__(self, drain: Drain) -> None:
        self.drain = drain

    def _enter(self) -> None:
        if self.drain.draining:
            raise MemplaneError(Code.UNAVAILABLE, "SERVER_SHUTTING_DOWN", "this server is shutting down; retry")
        self.drain.enter()

    async def around_unary(self, behavior, request, context, details):
        self._enter()
        try:
            return await behavior(request, context)
        finally:
            self.drain.leave()

    async def around_stream(self, behavior, request, context, details):
        self._enter()
        try:
            async for response in behavior(request, context):
                yield response
        finally:
            self.drain.leave()


def _metadata(details, name: str) -> str | None:
    for key, value in details.invocation_metadata or ():
        if key == name:
            return value
    return None


def client_address(context: grpc.aio.ServicerContext) -> str:
    """The peer's IP address without its port (`ipv4:10.0.0.7:5123` -> `10.0.0.7`), or the peer as
    gRPC names it when it is no IP connection."""
    peer = context.peer() or ""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    if kind == "ipv6":
        return rest.rsplit(":", 1)[0].strip("[]")
    return peer


class AuthInterceptor(CallInterceptor):
    """Resolves `authorization: Bearer <key>` (and `x-memplane-agent`) to the call's Caller. Calls
    without a valid key are counted per client address and refused beyond their rate, so that a
    flood of them costs no key lookups (RateLimits.count_failure)."""

    def __init__(self, authenticator: Authenticator, limits: RateLimits) -> None:
        self.authenticator = authenticator
        self.limits = limits

    async def _resolve(self, presented: str | None, agent: str | None, context) -> Caller:
        known = self.authenticator.cached(presented, agent)
        if known is not None:
            return known  # a key that just proved valid passes also while its address is held back
        address = client_address(context)
        self.limits.refuse_if_blocked(address)
        try:
            return await self.authenticator.resolve(presented, agent)
        except MemplaneError as exc:
            if exc.code is Code.UNAUTHENTICATED:
                await self.limits.count_failure(address)
            raise

    @staticmethod
    def _presented(details: grpc.HandlerCallDetails) -> tuple[str | None, str | None]:
        header = _metadata(details, "authorization") or ""
        return header[7:].strip() if header[:7].lower() == "bearer " else None, _metadata(details, "x-memplane-agent")

    async def around_unary(self, behavior, request, context, details):
        caller = await self._resolve(*self._presented(details), context)
        token, tenant = set_caller(caller), set_work_tenant(caller.tenant_id)
        try:
            return await behavior(request, context)
        finally:
            reset_work_tenant(tenant)
            reset_caller(token)

    async def around_stream(self, behavior, request, context, details):
        presented, agent = self._presented(details)
        caller = await self._resolve(presented, agent, context)
        # gRPC drives the whole stream from the call's own task, so what is set here holds across
        # the generator's steps.
        token, tenant = set_caller(caller), set_work_tenant(caller.tenant_id)
        again = set_reauthorize(lambda max_age: self.authenticator.resolve(presented, agent, max_age=max_age))
        try:
            async for response in behavior(request, context):
                yield response
        finally:
            try:
                reset_reauthorize(again)
                reset_work_tenant(tenant)
                reset_caller(token)
            except ValueError:  # closed from another context: that context never had them
                pass


class RateLimitInterceptor(CallInterceptor):
    """A token bucket per API key; over it: RESOURCE_EXHAUSTED with RetryInfo."""

    def __init__(self, limits: RateLimits) -> None:
        self.limits = limits

    async def around_unary(self, behavior, request, context, details):
        if details.method not in READ_METHODS:
            await self.limits.check(current_caller().key_id)
            return await behavior(request, context)
        # The check is a Redis round trip; a read starts meanwhile (it embeds its query for 20-30
        # ms, the check takes about 1) and is cancelled if the key is over its rate.
        work = asyncio.ensure_future(behavior(request, context))
        work.add_done_callback(_retrieve)
        try:
            await self.limits.check(current_caller().key_id)
        except BaseException:
            work.cancel()
            raise
        return await work

    async def around_stream(self, behavior, request, context, details):
        await self.limits.check(current_caller().key_id)  # a stream costs one request
        async for response in behavior(request, context):
            yield response


def _retrieve(task: asyncio.Task) -> None:
    """Marks the exception of a read abandoned for its rate check as seen (it is not the call's answer)."""
    if not task.cancelled():
        task.exception()


# Calls whose reads may go to the read standby, and the metadata of read-your-writes: each change
# answers with the primary's WAL position after it, and a read names the highest its caller saw.
STANDBY_READ_METHODS = frozenset(
    f"/memplane.v1.MemoryService/{name}" for name in ("Search", "GetMemory", "ListMemories"))
WRITTEN_UP_TO = "x-memplane-written-up-to"
READ_AFTER = "x-memplane-read-after"


class ReadRoutingInterceptor(CallInterceptor):
    """With a read standby (services/access/read_routing.py): Search, GetMemory and ListMemories read on it
    unless it lags the caller's own writes; the unary calls of MemoryService that may change memory
    answer with where the primary's WAL stood after them. Without one it wraps nothing."""

    def __init__(self, routing: ReadRouting) -> None:
        self.routing = routing

    def takes(self, method: str) -> bool:
        return (self.routing.enabled and method.startswith("/memplane.v1.MemoryService/")
                and (method in STANDBY_READ_METHODS or method not in READ_METHODS))

    async def around_unary(self, behavior, request, context, details):
        if details.method in STANDBY_READ_METHODS:
            token = await self.routing.route(dict(context.invocation_metadata() or ()).get(READ_AFTER))
            try:
                return await behavior(request, context)
            finally:
                self.routing.done(token)
        response = await behavior(request, context)
        context.set_trailing_metadata(((WRITTEN_UP_TO, await self.routing.written_up_to()),))
        return response


class IdempotencyInterceptor(CallInterceptor):
    """Mutations carrying a request_id run once per caller (tenant, key and agent); repeats by the
    same caller get the first response, another caller's same id is a new request."""

    def __init__(self, idempotency: Idempotency) -> None:
        self.idempotency = idempotency

    def takes(self, method: str) -> bool:
        return method in IDEMPOTENT_METHODS

    def response_serializer(self, serialize: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
        # A repeat's response comes back as the first response's serialized bytes.
        return lambda r: r if isinstance(r, bytes) else serialize(r)

    async def around_unary(self, behavior, request, context, details):
        request_id = getattr(request, "request_id", "")
        if not request_id:
            return await behavior(request, context)
        check_text(request_id, "request_id", MAX_REQUEST_ID_BYTES)
        method = details.method.rsplit("/", 1)[-1]
        key = request_key(current_caller(), method, request_id, request.SerializeToString(deterministic=True))

        async def call():
            token = set_request_key(key)
            try:
                return await behavior(request, context)
            finally:
                reset_request_key(token)

        if method == "Write" and write_recorded_whole(request):
            # PostgreSQL records the request key with the memories and answers a repeat with them as
            # they are now; a Redis claim and record as well were two more round trips, about 1 ms
            # of the 10 a single write added to its embedding (bench/README.md, peers.py).
            return await call()
        # Write records its request key in PostgreSQL with the memories it stores.
        return await self.idempotency.run_once(key, call, lambda response: response.SerializeToString(),
                                               recorded_in_postgres=method == "Write")


class UsageInterceptor(CallInterceptor):
    """Counts each authenticated call for its tenant, by method, into the process's usage tally
    (core/metering.py): a dict update, written off the request path."""

    def __init__(self, tally: UsageTally) -> None:
        self.tally = tally

    def _count(self, details: grpc.HandlerCallDetails) -> None:
        self.tally.add(work_tenant(), CALLS, details.method.rsplit("/", 1)[-1])

    async def around_unary(self, behavior, request, context, details):
        self._count(details)
        return await behavior(request, context)

    async def around_stream(self, behavior, request, context, details):
        self._count(details)
        async for response in behavior(request, context):
            yield response


class MetricsInterceptor(CallInterceptor):
    """Duration and count of every RPC by method and status code (OpenTelemetry metrics)."""

    public = True

    def __init__(self) -> None:
        meter = metrics.get_meter("memplane.server")
        self.duration = meter.create_histogram("rpc.server.duration", unit="ms", description="RPC duration")

    def _record(self, start: float, method: str, code: str) -> None:
        self.duration.record((time.perf_counter() - start) * 1000, {"rpc.method": method, "rpc.grpc.status_code": code})

    async def around_unary(self, behavior, request, context, details):
        start, code = time.perf_counter(), "OK"
        try:
            return await behavior(request, context)
        except BaseException:
            code = context.code().name if context.code() else "UNKNOWN"
            raise
        finally:
            self._record(start, details.method, code)

    async def around_stream(self, behavior, request, context, details):
        start, code = time.perf_counter(), "OK"
        try:
            async for response in behavior(request, context):
                yield response
        except BaseException:
            code = context.code().name if context.code() else "CANCELLED"
            raise
        finally:
            self._record(start, details.method, code)
