"""Channels, the retrying call loop, and the lifecycle shared by every client.

The sync and async halves mirror each other line for line; only the I/O (the RPC itself and
the wait between attempts) differs.
"""
from __future__ import annotations

import asyncio
import ipaddress
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, TypeVar

import grpc
import grpc.aio

from ._auth import Metadata, auth_metadata
from ._consistency import WritePosition
from ._requests import PreparedCall
from ._retry import RetryPolicy, RetryState, ensure_request_id, is_retryable_call
from ._version import __version__
from ._watch import WatchCursor
from .errors import from_rpc_error
from .v1.admin_service_pb2_grpc import AdminServiceStub
from .v1.memory_service_pb2_grpc import MemoryServiceStub
from .v1.operations_service_pb2_grpc import OperationsServiceStub

T = TypeVar("T")
_SelfSync = TypeVar("_SelfSync", bound="SyncClientBase")
_SelfAsync = TypeVar("_SelfAsync", bound="AsyncClientBase")

_STUBS = (MemoryServiceStub, OperationsServiceStub, AdminServiceStub)
_CHANNEL_OPTIONS = (
    ("grpc.primary_user_agent", f"memplane-python/{__version__}"),
    # gRPC's own reconnect backoff grows to two minutes; capped, a restarted server is reached
    # again within the retry budget instead of after it.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # Servers are stateless replicas: spread calls over every address the target resolves to (a
    # list of addresses, or a DNS name with several records such as a headless Service) rather
    # than gRPC's default of sticking to the first. A retry then goes to the next server, and a
    # server that went away drops out of the rotation once its connection fails.
    ("grpc.service_config", json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})),
)


def channel_target(target: str | Sequence[str]) -> str:
    """The gRPC target for one address ("host:port", or any gRPC target such as
    "dns:///memplane:50051") or for several IP addresses ("10.0.0.1:50051", "[::1]:50051"),
    which become one target of gRPC's own "ipv4:"/"ipv6:" resolvers, balanced round robin."""
    if isinstance(target, str):
        return target
    addresses = list(target)
    if not addresses:
        raise ValueError("target needs at least one address")
    families = set()
    for address in addresses:
        host, _, port = address.rpartition(":")
        try:
            families.add(ipaddress.ip_address(host.strip("[]")).version)
        except ValueError:
            raise ValueError(
                f"{address!r}: a list of targets takes IP addresses (host:port); give a host name with"
                " several addresses as one target, e.g. 'dns:///NAME:PORT'"
            ) from None
        if not port.isdigit():
            raise ValueError(f"{address!r}: the port is missing")
    if len(families) > 1:
        raise ValueError("a list of targets takes IPv4 or IPv6 addresses, not both")
    return f"ipv{families.pop()}:" + ",".join(addresses)


@dataclass(frozen=True)
class CallSettings:
    """What every call of one client shares: auth metadata, retry policy and default timeout."""

    # Out of repr because it holds the API key.
    metadata: Metadata = field(repr=False)
    retry: RetryPolicy
    default_timeout: float | None

    def start(self, prepared: PreparedCall[Any], timeout: float | None) -> RetryState:
        """Readies a logical call: pins its request_id and opens its retry state."""
        ensure_request_id(prepared.request)
        return RetryState(
            self.retry,
            retryable=is_retryable_call(prepared.method, prepared.request),
            timeout=self.default_timeout if timeout is None else timeout,
        )


def _rpcs(channel: Any) -> dict[str, Callable[..., Any]]:
    # Method names are unique across the three services, so one flat table serves every client.
    return {name: rpc for stub in _STUBS for name, rpc in vars(stub(channel)).items()}


def _channel_credentials(secure: bool, credentials: grpc.ChannelCredentials | None) -> grpc.ChannelCredentials | None:
    if credentials is not None:
        return credentials
    return grpc.ssl_channel_credentials() if secure else None


class SyncTransport:
    """Performs PreparedCalls over a grpc.Channel with auth, deadline, retries and error mapping."""

    def __init__(self, channel: grpc.Channel, settings: CallSettings, *, sleep: Callable[[float], None] = time.sleep):
        self._channel = channel
        self._settings = settings
        self._rpcs = _rpcs(channel)
        self._sleep = sleep
        self._written = WritePosition()

    def call(self, prepared: PreparedCall[T], timeout: float | None) -> T:
        """Sends the call, retrying per policy; raises a MemplaneError subclass on failure."""
        rpc = self._rpcs[prepared.method]
        state = self._settings.start(prepared, timeout)
        metadata = self._written.metadata(prepared.method, self._settings.metadata)
        while True:
            try:
                response, call = rpc.with_call(prepared.request, timeout=state.next_attempt_timeout(), metadata=metadata)
            except grpc.RpcError as exc:
                error = from_rpc_error(exc)
                delay = state.delay_before_retry(error)
                if delay is None:
                    raise error from exc
                self._sleep(delay)
            else:
                self._written.learn(call.trailing_metadata())
                return prepared.convert(response)

    def watch(self, cursor: WatchCursor, *, timeout: float | None, resume: bool) -> Iterator[Any]:
        """Streams Watch, reconnecting after the last position handed over when the stream
        breaks with a retryable error (per the retry policy, whose budget starts again with
        every response received)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        rpc = self._rpcs["Watch"]
        state = _stream_state(self._settings, resume, deadline)
        while True:
            call = rpc(cursor.next_request(), timeout=state.next_attempt_timeout(), metadata=self._settings.metadata)
            try:
                for response in call:
                    state = _stream_state(self._settings, resume, deadline)
                    for position, item in cursor.items(response):
                        cursor.position = position
                        yield item
                    cursor.finish(response)
                return
            except grpc.RpcError as exc:
                error = from_rpc_error(exc)
                delay = state.delay_before_retry(error)
                if delay is None:
                    raise error from exc
                self._sleep(delay)
            finally:
                call.cancel()

    def close(self) -> None:
        """Closes the channel."""
        self._channel.close()


class AsyncTransport:
    """The asyncio twin of SyncTransport, over a grpc.aio.Channel."""

    def __init__(
        self, channel: grpc.aio.Channel, settings: CallSettings, *, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
    ):
        self._channel = channel
        self._settings = settings
        self._rpcs = _rpcs(channel)
        self._sleep = sleep
        self._written = WritePosition()

    async def call(self, prepared: PreparedCall[T], timeout: float | None) -> T:
        """Sends the call, retrying per policy; raises a MemplaneError subclass on failure."""
        rpc = self._rpcs[prepared.method]
        state = self._settings.start(prepared, timeout)
        metadata = self._written.metadata(prepared.method, self._settings.metadata)
        while True:
            try:
                call = rpc(prepared.request, timeout=state.next_attempt_timeout(), metadata=metadata)
                response = await call
            except grpc.RpcError as exc:
                error = from_rpc_error(exc)
                delay = state.delay_before_retry(error)
                if delay is None:
                    raise error from exc
                await self._sleep(delay)
            else:
                self._written.learn(await call.trailing_metadata())
                return prepared.convert(response)

    async def watch(self, cursor: WatchCursor, *, timeout: float | None, resume: bool) -> AsyncIterator[Any]:
        """The asyncio twin of SyncTransport.watch."""
        deadline = None if timeout is None else time.monotonic() + timeout
        rpc = self._rpcs["Watch"]
        state = _stream_state(self._settings, resume, deadline)
        while True:
            call = rpc(cursor.next_request(), timeout=state.next_attempt_timeout(), metadata=self._settings.metadata)
            try:
                async for response in call:
                    state = _stream_state(self._settings, resume, deadline)
                    for position, item in cursor.items(response):
                        cursor.position = position
                        yield item
                    cursor.finish(response)
                return
            except grpc.RpcError as exc:
                error = from_rpc_error(exc)
                delay = state.delay_before_retry(error)
                if delay is None:
                    raise error from exc
                await self._sleep(delay)
            finally:
                call.cancel()

    async def close(self) -> None:
        """Closes the channel."""
        await self._channel.close()


def _stream_state(settings: CallSettings, resume: bool, deadline: float | None) -> RetryState:
    remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
    return RetryState(settings.retry, retryable=resume, timeout=remaining)


def _settings(api_key: str, agent_id: str | None, retry: RetryPolicy, default_timeout: float | None) -> CallSettings:
    if default_timeout is not None and default_timeout <= 0:
        raise ValueError("default_timeout must be positive or None")
    return CallSettings(auth_metadata(api_key, agent_id), retry, default_timeout)


class SyncClientBase:
    """Connection setup and lifecycle of the blocking clients."""

    def __init__(
        self,
        target: str | Sequence[str],
        api_key: str,
        *,
        agent_id: str | None = None,
        retry: RetryPolicy = RetryPolicy(),
        default_timeout: float | None = 30.0,
        secure: bool = False,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        """Opens a channel to target ("host:port"), or to several servers, balanced round robin.

        Args:
            target: Server address, any gRPC target (e.g. "dns:///memplane:50051", whose every
                address is used), or a list of IP addresses ("10.0.0.1:50051", ...).
            api_key: API key secret, sent as a bearer token on every call.
            agent_id: Agent to act as, for keys not bound to an agent.
            retry: Retry policy; RetryPolicy(max_attempts=1) disables retries.
            default_timeout: Seconds a call may take, retries included, unless it passes timeout.
            secure: Use TLS with the system roots.
            credentials: Explicit channel credentials (implies TLS).
        """
        settings = _settings(api_key, agent_id, retry, default_timeout)
        creds = _channel_credentials(secure, credentials)
        channel = (
            grpc.secure_channel(channel_target(target), creds, options=_CHANNEL_OPTIONS)
            if creds is not None
            else grpc.insecure_channel(channel_target(target), options=_CHANNEL_OPTIONS)
        )
        self._transport = SyncTransport(channel, settings)

    def close(self) -> None:
        """Closes the connection; the client is unusable afterwards."""
        self._transport.close()

    def __enter__(self: _SelfSync) -> _SelfSync:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncClientBase:
    """Connection setup and lifecycle of the asyncio clients."""

    def __init__(
        self,
        target: str | Sequence[str],
        api_key: str,
        *,
        agent_id: str | None = None,
        retry: RetryPolicy = RetryPolicy(),
        default_timeout: float | None = 30.0,
        secure: bool = False,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        """Opens a channel to target (one address or several); arguments as for the blocking clients."""
        settings = _settings(api_key, agent_id, retry, default_timeout)
        creds = _channel_credentials(secure, credentials)
        channel = (
            grpc.aio.secure_channel(channel_target(target), creds, options=_CHANNEL_OPTIONS)
            if creds is not None
            else grpc.aio.insecure_channel(channel_target(target), options=_CHANNEL_OPTIONS)
        )
        self._transport = AsyncTransport(channel, settings)

    async def close(self) -> None:
        """Closes the connection; the client is unusable afterwards."""
        await self._transport.close()

    async def __aenter__(self: _SelfAsync) -> _SelfAsync:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
