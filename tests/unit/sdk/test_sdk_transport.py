"""The retrying call loop, driven through a fake channel (no network)."""
from __future__ import annotations

import grpc
import pytest

from memplane import _requests
from memplane._retry import REPEATABLE_METHODS, RetryPolicy
from memplane._transport import AsyncTransport, CallSettings, SyncTransport, channel_target
from memplane.errors import InvalidArgumentError, UnavailableError
from memplane.v1 import admin_service_pb2, memory_pb2, operations_service_pb2
from memplane.v1 import memory_service_pb2 as svc_pb

METADATA = (("authorization", "Bearer k"),)


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._code.name.lower()

    def trailing_metadata(self) -> tuple:
        return ()


class FakeRpc:
    """Plays back scripted outcomes (exceptions or responses) and records each attempt."""

    def __init__(self) -> None:
        self.outcomes: list = []
        self.attempts: list[dict] = []
        self.trailing: tuple = ()  # the trailing metadata of each answer

    def __call__(self, request, *, timeout=None, metadata=None):
        self.attempts.append({"request": type(request).FromString(request.SerializeToString()),
                              "timeout": timeout, "metadata": metadata})
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def with_call(self, request, *, timeout=None, metadata=None):
        return self(request, timeout=timeout, metadata=metadata), FakeCall(self.trailing)


class FakeCall:
    def __init__(self, trailing: tuple) -> None:
        self._trailing = trailing

    def trailing_metadata(self) -> tuple:
        return self._trailing


class AsyncFakeCall:
    """What a grpc.aio call gives: awaited for the answer, then its trailing metadata."""

    def __init__(self, answer, trailing: tuple) -> None:
        self._answer, self._trailing = answer, trailing

    def __await__(self):
        async def answer():
            return self._answer()
        return answer().__await__()

    async def trailing_metadata(self) -> tuple:
        return self._trailing


class AsyncFakeRpc(FakeRpc):
    def __call__(self, request, *, timeout=None, metadata=None):
        return AsyncFakeCall(lambda: FakeRpc.__call__(self, request, timeout=timeout, metadata=metadata), self.trailing)


class FakeChannel:
    def __init__(self, rpc_type: type[FakeRpc] = FakeRpc) -> None:
        self.rpcs: dict[str, FakeRpc] = {}
        self._rpc_type = rpc_type

    def unary_unary(self, path, **_):
        return self.rpcs.setdefault(path.rsplit("/", 1)[1], self._rpc_type())

    unary_stream = unary_unary


def settings(max_attempts: int = 4) -> CallSettings:
    return CallSettings(METADATA, RetryPolicy(max_attempts=max_attempts), default_timeout=30.0)


def write_call() -> _requests.PreparedCall:
    return _requests.write([{"content": "x", "kind": "fact"}], request_id=None, infer=None, time_zone=None)


WRITE_OK = svc_pb.WriteResponse(memories=[memory_pb2.Memory(id="m1")])


def test_every_rpc_of_every_service_is_reachable():
    channel = FakeChannel()
    SyncTransport(channel, settings())
    services = [svc_pb, operations_service_pb2, admin_service_pb2]
    names = {m.name for module in services for s in module.DESCRIPTOR.services_by_name.values() for m in s.methods}
    assert set(channel.rpcs) == names and REPEATABLE_METHODS <= names


def test_retries_of_one_write_reuse_its_generated_request_id():
    channel, sleeps = FakeChannel(), []
    transport = SyncTransport(channel, settings(), sleep=sleeps.append)
    channel.rpcs["Write"].outcomes = [FakeRpcError(grpc.StatusCode.UNAVAILABLE)] * 2 + [WRITE_OK]
    result = transport.call(write_call(), None)
    ids = {a["request"].request_id for a in channel.rpcs["Write"].attempts}
    assert result.memories[0].id == "m1" and len(ids) == 1 and ids != {""}
    assert len(sleeps) == 2 and 0 <= sleeps[0] <= 0.1 and 0 <= sleeps[1] <= 0.2


def test_each_attempt_sends_the_auth_metadata_and_a_deadline():
    channel = FakeChannel()
    transport = SyncTransport(channel, settings())
    channel.rpcs["GetMemory"].outcomes = [svc_pb.GetMemoryResponse(memory=memory_pb2.Memory(id="m1"))]
    transport.call(_requests.get_memory("m1"), 5.0)
    attempt = channel.rpcs["GetMemory"].attempts[0]
    assert attempt["metadata"] == METADATA and 0 < attempt["timeout"] <= 5.0


def test_after_the_last_attempt_the_mapped_error_is_raised_from_the_grpc_one():
    channel = FakeChannel()
    transport = SyncTransport(channel, settings(max_attempts=3), sleep=lambda _: None)
    channel.rpcs["GetMemory"].outcomes = [FakeRpcError(grpc.StatusCode.UNAVAILABLE)] * 3
    with pytest.raises(UnavailableError) as raised:
        transport.call(_requests.get_memory("m1"), None)
    assert isinstance(raised.value.__cause__, grpc.RpcError)
    assert len(channel.rpcs["GetMemory"].attempts) == 3


def test_a_write_cancelled_by_a_stopping_server_is_sent_again_with_its_request_id():
    channel = FakeChannel()
    transport = SyncTransport(channel, settings(), sleep=lambda _: None)
    # What a call reaching a server as it stops (or still running past its grace time) gets.
    channel.rpcs["Write"].outcomes = [FakeRpcError(grpc.StatusCode.CANCELLED), WRITE_OK]
    assert transport.call(write_call(), None).memories[0].id == "m1"
    assert len({a["request"].request_id for a in channel.rpcs["Write"].attempts}) == 1


def test_a_mutation_without_request_id_cancelled_by_the_server_is_not_sent_again():
    from memplane.errors import MemplaneError

    channel = FakeChannel()
    transport = SyncTransport(channel, settings(), sleep=lambda _: None)
    channel.rpcs["SubmitFeedback"].outcomes = [FakeRpcError(grpc.StatusCode.CANCELLED)]
    with pytest.raises(MemplaneError) as raised:
        transport.call(_requests.submit_feedback(["m1"], useful=True, outcome=None, task_id="", comment=""), None)
    assert raised.value.code == grpc.StatusCode.CANCELLED and len(channel.rpcs["SubmitFeedback"].attempts) == 1


def test_a_conflict_resolution_the_server_did_not_answer_is_not_sent_again():
    # It changes state and has no request_id: sent again after it ran, it would fail as already resolved.
    from memplane.errors import MemplaneError

    channel = FakeChannel()
    transport = SyncTransport(channel, settings(), sleep=lambda _: None)
    channel.rpcs["ResolveConflict"].outcomes = [FakeRpcError(grpc.StatusCode.UNAVAILABLE)]
    with pytest.raises(MemplaneError):
        transport.call(_requests.resolve_conflict("m2", keep="challenger", reason=""), None)
    assert len(channel.rpcs["ResolveConflict"].attempts) == 1


def test_a_call_cancelled_by_the_clients_own_close_is_not_sent_again():
    from memplane.errors import MemplaneError

    channel = FakeChannel()
    channel.close = lambda: None
    transport = SyncTransport(channel, settings(), sleep=lambda _: None)

    def closed_meanwhile(request, *, timeout=None, metadata=None):
        transport.close()
        raise FakeRpcError(grpc.StatusCode.CANCELLED)

    channel.rpcs["GetMemory"].with_call = closed_meanwhile
    with pytest.raises(MemplaneError) as raised:
        transport.call(_requests.get_memory("m1"), None)
    assert raised.value.code == grpc.StatusCode.CANCELLED


async def test_async_calls_cancelled_by_a_stopping_server_are_sent_again_too():
    async def no_sleep(_):
        return None

    channel = FakeChannel(AsyncFakeRpc)
    transport = AsyncTransport(channel, settings(), sleep=no_sleep)
    channel.rpcs["Write"].outcomes = [FakeRpcError(grpc.StatusCode.CANCELLED), WRITE_OK]
    assert (await transport.call(write_call(), None)).memories[0].id == "m1"
    assert len(channel.rpcs["Write"].attempts) == 2


def test_a_mutation_without_request_id_is_tried_once():
    channel = FakeChannel()
    transport = SyncTransport(channel, settings(), sleep=lambda _: None)
    channel.rpcs["SubmitFeedback"].outcomes = [FakeRpcError(grpc.StatusCode.UNAVAILABLE)]
    with pytest.raises(UnavailableError):
        transport.call(_requests.submit_feedback(["m1"], useful=True, outcome=None, task_id="", comment=""), None)
    assert len(channel.rpcs["SubmitFeedback"].attempts) == 1


def test_non_retryable_codes_fail_at_once():
    channel = FakeChannel()
    transport = SyncTransport(channel, settings(), sleep=lambda _: None)
    channel.rpcs["GetMemory"].outcomes = [FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT)]
    with pytest.raises(InvalidArgumentError):
        transport.call(_requests.get_memory(""), None)
    assert len(channel.rpcs["GetMemory"].attempts) == 1


async def test_async_retries_reuse_the_request_id_too():
    channel, sleeps = FakeChannel(AsyncFakeRpc), []

    async def sleep(delay: float) -> None:
        sleeps.append(delay)

    transport = AsyncTransport(channel, settings(), sleep=sleep)
    channel.rpcs["Write"].outcomes = [FakeRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED), WRITE_OK]
    result = await transport.call(write_call(), None)
    ids = {a["request"].request_id for a in channel.rpcs["Write"].attempts}
    assert result.memories[0].id == "m1" and len(ids) == 1 and len(sleeps) == 1


@pytest.mark.parametrize(("target", "expected"), [
    ("memplane:50051", "memplane:50051"),
    ("dns:///memplane-headless:50051", "dns:///memplane-headless:50051"),
    (["127.0.0.1:1", "127.0.0.1:2"], "ipv4:127.0.0.1:1,127.0.0.1:2"),
    (["[::1]:1", "[::1]:2"], "ipv6:[::1]:1,[::1]:2"),
])
def test_a_target_or_a_list_of_addresses_becomes_one_grpc_target(target, expected):
    assert channel_target(target) == expected


@pytest.mark.parametrize("target", [[], ["memplane:50051"], ["127.0.0.1"], ["127.0.0.1:1", "[::1]:2"]])
def test_a_list_of_targets_takes_ip_addresses_with_ports_of_one_family(target):
    with pytest.raises(ValueError):
        channel_target(target)

# --- watch --------------------------------------------------------------------------------


class FakeStream:
    """A server stream: yields its responses, then raises its error (if any)."""

    def __init__(self, responses, error=None) -> None:
        self.responses, self.error, self.cancelled = list(responses), error, False

    def __iter__(self):
        yield from self.responses
        if self.error is not None:
            raise self.error

    async def __aiter__(self):
        for r in self.responses:
            yield r
        if self.error is not None:
            raise self.error

    def cancel(self) -> None:
        self.cancelled = True


def change(position: int, memory_id: str = "m") -> svc_pb.ChangeEvent:
    return svc_pb.ChangeEvent(position=position, memory_id=memory_id, change_kind=svc_pb.CHANGE_KIND_CREATED,
                              memory=memory_pb2.Memory(id=memory_id, content=f"c{position}"))


def watch_streams():
    return [
        FakeStream([svc_pb.WatchResponse(position=10), svc_pb.WatchResponse(events=[change(11), change(12)], position=12)],
                   FakeRpcError(grpc.StatusCode.UNAVAILABLE)),
        FakeStream([svc_pb.WatchResponse(position=12), svc_pb.WatchResponse(position=20),
                    svc_pb.WatchResponse(events=[change(21)], position=25)]),
    ]


def test_watch_resumes_after_the_last_position_handed_over():
    from memplane._watch import WatchCursor
    from memplane.types import ChangeEvent, WatchProgress

    channel, sleeps = FakeChannel(), []
    transport = SyncTransport(channel, settings(), sleep=sleeps.append)
    streams = watch_streams()
    channel.rpcs["Watch"].outcomes = list(streams)
    cursor = WatchCursor(after_position=None, progress=True, scopes="global", session_id="s1", entity=None,
                         kinds=None, change_kinds="created")
    items = list(transport.watch(cursor, timeout=None, resume=True))
    assert [type(i).__name__ for i in items] == ["WatchProgress", "ChangeEvent", "ChangeEvent", "WatchProgress",
                                                 "WatchProgress", "ChangeEvent"]
    assert [i.position for i in items] == [10, 11, 12, 12, 20, 21]
    assert isinstance(items[1], ChangeEvent) and items[1].memory.content == "c11"
    assert isinstance(items[0], WatchProgress)
    first, second = (a["request"] for a in channel.rpcs["Watch"].attempts)
    assert not first.HasField("after_position") and second.after_position == 12
    assert second.filter.session_id == "s1" and list(second.filter.change_kinds) == [svc_pb.CHANGE_KIND_CREATED]
    assert len(sleeps) == 1 and all(s.cancelled for s in streams)
    assert cursor.position == 25


def test_watch_resumes_after_the_server_cancels_the_stream():
    from memplane._watch import WatchCursor

    channel = FakeChannel()
    transport = SyncTransport(channel, settings(), sleep=lambda _: None)
    first, second = watch_streams()
    first.error = FakeRpcError(grpc.StatusCode.CANCELLED)  # a server stopping past its grace time
    channel.rpcs["Watch"].outcomes = [first, second]
    cursor = WatchCursor(after_position=None, progress=False, scopes=None, session_id=None, entity=None, kinds=None,
                         change_kinds=None)
    assert [i.position for i in transport.watch(cursor, timeout=None, resume=True)] == [11, 12, 21]
    assert channel.rpcs["Watch"].attempts[1]["request"].after_position == 12


def test_watch_does_not_resume_a_stream_cancelled_by_the_clients_own_close():
    from memplane._watch import WatchCursor
    from memplane.errors import MemplaneError

    channel = FakeChannel()
    channel.close = lambda: None
    transport = SyncTransport(channel, settings(), sleep=lambda _: None)
    first, second = watch_streams()
    first.error = FakeRpcError(grpc.StatusCode.CANCELLED)
    channel.rpcs["Watch"].outcomes = [first, second]
    cursor = WatchCursor(after_position=None, progress=False, scopes=None, session_id=None, entity=None, kinds=None,
                         change_kinds=None)
    stream = transport.watch(cursor, timeout=None, resume=True)
    assert next(stream).position == 11
    transport.close()
    with pytest.raises(MemplaneError) as raised:
        list(stream)
    assert raised.value.code == grpc.StatusCode.CANCELLED and len(channel.rpcs["Watch"].attempts) == 1


def test_watch_without_resume_raises_the_typed_error():
    from memplane._watch import WatchCursor

    channel = FakeChannel()
    transport = SyncTransport(channel, settings(), sleep=lambda _: None)
    channel.rpcs["Watch"].outcomes = watch_streams()
    cursor = WatchCursor(after_position=5, progress=False, scopes=None, session_id=None, entity=None, kinds=None,
                         change_kinds=None)
    got = []
    with pytest.raises(UnavailableError):
        for item in transport.watch(cursor, timeout=None, resume=False):
            got.append(item.position)
    assert got == [11, 12] and channel.rpcs["Watch"].attempts[0]["request"].after_position == 5


async def test_async_watch_resumes_too():
    from memplane._watch import WatchCursor

    async def no_sleep(_):
        return None

    channel = FakeChannel()
    transport = AsyncTransport(channel, settings(), sleep=no_sleep)
    channel.rpcs["Watch"].outcomes = watch_streams()
    cursor = WatchCursor(after_position=None, progress=False, scopes=None, session_id=None, entity=None, kinds=None,
                         change_kinds=None)
    got = [item.position async for item in transport.watch(cursor, timeout=None, resume=True)]
    assert got == [11, 12, 21]
    assert channel.rpcs["Watch"].attempts[1]["request"].after_position == 12


async def test_async_watch_resumes_after_the_server_cancels_the_stream():
    from memplane._watch import WatchCursor

    async def no_sleep(_):
        return None

    channel = FakeChannel()
    transport = AsyncTransport(channel, settings(), sleep=no_sleep)
    first, second = watch_streams()
    first.error = FakeRpcError(grpc.StatusCode.CANCELLED)
    channel.rpcs["Watch"].outcomes = [first, second]
    cursor = WatchCursor(after_position=None, progress=False, scopes=None, session_id=None, entity=None, kinds=None,
                         change_kinds=None)
    assert [item.position async for item in transport.watch(cursor, timeout=None, resume=True)] == [11, 12, 21]


def test_reads_carry_the_furthest_write_position_the_server_gave():
    channel = FakeChannel()
    transport = SyncTransport(channel, settings())
    for position in ("0/16B3748", "0/9", "1/0"):  # "1/0" is past "0/16B3748" and "0/9" is not
        channel.rpcs["Write"].outcomes.append(WRITE_OK)
        channel.rpcs["Write"].trailing = (("x-memplane-written-up-to", position),)
        transport.call(write_call(), timeout=None)
    channel.rpcs["Search"].outcomes.append(svc_pb.SearchResponse())
    transport.call(_requests.search("q", top_k=1, token_budget=0, as_of=None, scope_weights=None, explain=False,
                                    time_zone=None, filters={}), timeout=None)
    assert channel.rpcs["Search"].attempts[0]["metadata"] == (*METADATA, ("x-memplane-read-after", "1/0"))
    assert channel.rpcs["Write"].attempts[0]["metadata"] == METADATA  # changes carry none


async def test_the_async_transport_learns_write_positions_too():
    channel = FakeChannel(AsyncFakeRpc)
    transport = AsyncTransport(channel, settings())
    channel.rpcs["Write"].outcomes.append(WRITE_OK)
    channel.rpcs["Write"].trailing = (("x-memplane-written-up-to", "0/2A"),)
    await transport.call(write_call(), timeout=None)
    channel.rpcs["GetMemory"].outcomes.append(svc_pb.GetMemoryResponse())
    await transport.call(_requests.get_memory("m1"), timeout=None)
    assert channel.rpcs["GetMemory"].attempts[0]["metadata"] == (*METADATA, ("x-memplane-read-after", "0/2A"))
