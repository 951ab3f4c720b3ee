"""The asyncio transport and client base: the retrying call loop and the resuming watch stream
over a grpc.aio channel, and the connection setup and lifecycle of the asyncio clients."""
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import TracebackType
from typing import AsyncIterator, TypeVar

import grpc

from ._channel import (
    CHANNEL_OPTIONS,
    AsyncSleep,
    CallSettings,
    call_settings,
    channel_credentials,
    channel_target,
    deadline_after,
    retry_code,
    rpcs,
    stream_state,
)
from ._consistency import WritePosition
from ._requests import PreparedCall
from ._retry import RetryPolicy, RetryState
from ._watch import WatchCursor, WatchItem
from .errors import from_rpc_error

T = TypeVar("T")
_Self = TypeVar("_Self", bound="AsyncClientBase")


class AsyncTransport:
    """Performs PreparedCalls over a grpc.aio.Channel with auth, deadline, retries and error mapping."""

    def __init__(self, channel: grpc.aio.Channel, settings: CallSettings, *, sleep: AsyncSleep = asyncio.sleep) -> None:
        self._channel = channel
        self._settings = settings
        self._rpcs = rpcs(channel)
        self._sleep = sleep
        self._written = WritePosition()
        self._closed = False

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
                await self._wait_to_retry(state, exc, retry_code(exc, self._closed))
            else:
                self._written.learn(await call.trailing_metadata())
                return prepared.convert(response)

    async def watch(self, cursor: WatchCursor, *, timeout: float | None, resume: bool) -> AsyncIterator[WatchItem]:
        """Streams Watch, reconnecting after the last position handed over when the stream
        breaks with a retryable error (per the retry policy, whose budget starts again with
        every response received)."""
        deadline = deadline_after(timeout)
        rpc = self._rpcs["Watch"]
        state = stream_state(self._settings, resume, deadline)
        while True:
            call = rpc(cursor.next_request(), timeout=state.next_attempt_timeout(), metadata=self._settings.metadata)
            try:
                async for response in call:
                    state = stream_state(self._settings, resume, deadline)
                    for position, item in cursor.items(response):
                        cursor.position = position
                        yield item
                    cursor.finish(response)
                return
            except grpc.RpcError as exc:
                await self._wait_to_retry(state, exc, retry_code(exc, self._closed))
            finally:
                call.cancel()

    async def _wait_to_retry(self, state: RetryState, exc: grpc.RpcError, code: grpc.StatusCode | None = None) -> None:
        """Waits before the next attempt (decided as if by `code` when given), or raises the mapped
        error when the policy allows none."""
        error = from_rpc_error(exc)
        delay = state.delay_before_retry(error, code)
        if delay is None:
            raise error from exc
        await self._sleep(delay)

    async def close(self) -> None:
        """Closes the channel."""
        self._closed = True
        await self._channel.close()


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
        settings = call_settings(api_key, agent_id, retry, default_timeout)
        creds = channel_credentials(secure, credentials)
        channel = (
            grpc.aio.secure_channel(channel_target(target), creds, options=CHANNEL_OPTIONS)
            if creds is not None
            else grpc.aio.insecure_channel(channel_target(target), options=CHANNEL_OPTIONS)
        )
        self._transport = AsyncTransport(channel, settings)

    async def close(self) -> None:
        """Closes the connection; the client is unusable afterwards."""
        await self._transport.close()

    async def __aenter__(self: _Self) -> _Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
