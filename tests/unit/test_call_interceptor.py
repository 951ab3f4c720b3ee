"""CallInterceptor: one place passes the public methods by and wraps unary calls and server streams;
the authentication step sets the caller and the tenant whose work it is for both kinds of call."""
from __future__ import annotations

import asyncio
from collections import namedtuple

import grpc

from memplane_server.api.context import current_caller
from memplane_server.api.interceptors import AuthInterceptor, CallInterceptor
from memplane_server.core.access.attribution import work_tenant
from memplane_server.core.access.caller import Caller, Role

Details = namedtuple("Details", "method invocation_metadata")
CALLER = Caller(key_id="k", role=Role.WRITER, tenant_id="t-1", agent_id=None, domains={})


class Marking(CallInterceptor):
    """Answers what it wrapped: 'unary:<answer>' and each streamed item as 'stream:<item>'."""

    def takes(self, method: str) -> bool:
        return not method.endswith("/Skipped")

    async def around_unary(self, behavior, request, context, details):
        return f"unary:{await behavior(request, context)}"

    async def around_stream(self, behavior, request, context, details):
        async for item in behavior(request, context):
            yield f"stream:{item}"


async def _answer(request, context):
    return "answer"


async def _items(request, context):
    for item in ("a", "b"):
        yield item


def handlers():
    return {"unary": grpc.unary_unary_rpc_method_handler(_answer),
            "stream": grpc.unary_stream_rpc_method_handler(_items)}


def wrapped(step: CallInterceptor, method: str, kind: str, metadata=()):
    async def continuation(details):
        return handlers()[kind]
    return asyncio.run(step.intercept_service(continuation, Details(method, metadata)))


async def collect(stream):
    return [item async for item in stream]


def test_unary_calls_and_streams_are_wrapped_by_their_own_hook():
    unary = wrapped(Marking(), "/memplane.v1.MemoryService/Search", "unary")
    stream = wrapped(Marking(), "/memplane.v1.MemoryService/Watch", "stream")
    assert asyncio.run(unary.unary_unary(None, None)) == "unary:answer"
    assert asyncio.run(collect(stream.unary_stream(None, None))) == ["stream:a", "stream:b"]


def test_public_methods_and_methods_a_step_does_not_take_pass_by_unwrapped():
    health = wrapped(Marking(), "/grpc.health.v1.Health/Check", "unary")
    skipped = wrapped(Marking(), "/memplane.v1.MemoryService/Skipped", "unary")
    assert asyncio.run(health.unary_unary(None, None)) == "answer"
    assert asyncio.run(skipped.unary_unary(None, None)) == "answer"


class KnownKey:
    """An authenticator that has just proved the key valid (its cache answers)."""

    def cached(self, presented, agent):
        return CALLER if presented == "mpk_good" else None


def test_a_stream_runs_as_its_caller_with_its_tenant_for_telemetry_as_a_unary_call_does():
    async def seen(request, context):
        yield (current_caller().tenant_id, work_tenant())

    async def continuation(details):
        return grpc.unary_stream_rpc_method_handler(seen)

    async def run():
        step = AuthInterceptor(KnownKey(), limits=None)
        handler = await step.intercept_service(
            continuation, Details("/memplane.v1.MemoryService/Watch", (("authorization", "Bearer mpk_good"),)))
        return await collect(handler.unary_stream(None, None)), work_tenant()

    inside, after = asyncio.run(run())
    assert inside == [("t-1", "t-1")] and after == ""
