"""Shape of the public clients and the logic they add on top of single calls."""
from __future__ import annotations

import dataclasses
import inspect

import pytest

from memplane import (
    AdminClient,
    AsyncAdminClient,
    AsyncMemoryClient,
    MemoryChanges,
    MemoryClient,
    MemoryFields,
    MemoryInput,
    Operation,
    OperationState,
    Page,
    _requests,
)


def public_methods(cls: type) -> dict[str, object]:
    return {name: fn for name, fn in vars(cls).items() if callable(fn) and not name.startswith("_")}


def parameters(fn) -> inspect.Signature:
    # Return types legitimately differ (Iterator vs AsyncIterator); the parameters must not.
    return inspect.signature(fn).replace(return_annotation=inspect.Signature.empty)


@pytest.mark.parametrize(("sync", "aio"), [(MemoryClient, AsyncMemoryClient), (AdminClient, AsyncAdminClient)])
def test_async_client_mirrors_the_sync_parameters(sync, aio):
    sync_methods, aio_methods = public_methods(sync), public_methods(aio)
    assert sync_methods.keys() == aio_methods.keys()
    for name, fn in sync_methods.items():
        assert parameters(fn) == parameters(aio_methods[name]), name
    assert parameters(sync.__init__) == parameters(aio.__init__)


@pytest.mark.parametrize("aio", [AsyncMemoryClient, AsyncAdminClient])
def test_async_client_methods_are_coroutines_or_async_iterators(aio):
    for name, fn in public_methods(aio).items():
        assert inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn), name


@pytest.mark.parametrize("cls", [MemoryClient, AdminClient])
def test_every_method_takes_a_keyword_only_timeout(cls):
    for name, fn in public_methods(cls).items():
        if name == "close":
            continue
        parameter = inspect.signature(fn).parameters.get("timeout")
        assert parameter is not None and parameter.kind is inspect.Parameter.KEYWORD_ONLY, name


def test_write_one_keywords_are_the_memory_input_fields():
    fields = {f.name for f in dataclasses.fields(MemoryInput)} - {"content", "kind"}
    assert set(MemoryFields.__annotations__) == fields


def test_update_memory_keywords_are_what_the_request_builder_takes():
    parameters = set(inspect.signature(_requests.update_memory).parameters) - {"id", "request_id"}
    assert set(MemoryChanges.__annotations__) == parameters


class ScriptedTransport:
    """Answers PreparedCalls from a list of results, recording the requests."""

    def __init__(self, results: list) -> None:
        self.results = results
        self.requests: list = []
        self.closed = False

    def call(self, prepared, timeout):
        self.requests.append(prepared.request)
        return self.results.pop(0)

    def close(self) -> None:
        self.closed = True


class AsyncScriptedTransport(ScriptedTransport):
    async def call(self, prepared, timeout):
        return super().call(prepared, timeout)


def with_transport(cls: type, transport: ScriptedTransport):
    client = cls.__new__(cls)  # skips opening a channel
    client._transport = transport
    return client


def op(state: OperationState) -> Operation:
    return Operation("op1", "reflect", state, 1, "", "", None, None, (), "")


def test_iter_memories_walks_every_page():
    transport = ScriptedTransport([Page(("a", "b"), "t2"), Page(("c",), "")])
    client = with_transport(MemoryClient, transport)
    assert list(client.iter_memories(page_size=2, user_id="u1")) == ["a", "b", "c"]
    assert [r.page_token for r in transport.requests] == ["", "t2"]
    assert {r.filter.user_id for r in transport.requests} == {"u1"}


async def test_async_iter_memories_walks_every_page():
    client = with_transport(AsyncMemoryClient, AsyncScriptedTransport([Page(("a",), "t2"), Page(("b",), "")]))
    assert [m async for m in client.iter_memories()] == ["a", "b"]


def test_wait_operation_polls_until_done():
    states = [OperationState.PENDING, OperationState.RUNNING, OperationState.SUCCEEDED]
    transport = ScriptedTransport([op(s) for s in states])
    client = with_transport(MemoryClient, transport)
    assert client.wait_operation("op1", poll_interval=0.001).state is OperationState.SUCCEEDED
    assert len(transport.requests) == 3


async def test_async_wait_operation_polls_until_done():
    transport = AsyncScriptedTransport([op(OperationState.RUNNING), op(OperationState.FAILED)])
    client = with_transport(AsyncMemoryClient, transport)
    assert (await client.wait_operation("op1", poll_interval=0.001)).state is OperationState.FAILED


def test_context_manager_closes_the_client():
    transport = ScriptedTransport([])
    with with_transport(AdminClient, transport):
        pass
    assert transport.closed


def test_constructor_rejects_a_missing_api_key_before_connecting():
    with pytest.raises(ValueError):
        MemoryClient("localhost:1", "")
