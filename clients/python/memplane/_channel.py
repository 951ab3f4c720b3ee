"""What the blocking and asyncio transports share: the channel target and options, the settings
every call of a client shares, and the retry state of a call or of a watch stream."""
from __future__ import annotations

import ipaddress
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import grpc

from ._auth import Metadata, auth_metadata
from ._requests import PreparedCall
from ._retry import RetryPolicy, RetryState, ensure_request_id, is_retryable_call
from ._version import __version__
from .v1.admin_service_pb2_grpc import AdminServiceStub
from .v1.memory_service_pb2_grpc import MemoryServiceStub
from .v1.operations_service_pb2_grpc import OperationsServiceStub

#: How a transport waits between attempts (injected so tests need not wait).
Sleep = Callable[[float], None]
AsyncSleep = Callable[[float], Awaitable[None]]

_STUBS = (MemoryServiceStub, OperationsServiceStub, AdminServiceStub)
CHANNEL_OPTIONS = (
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


def channel_credentials(secure: bool, credentials: grpc.ChannelCredentials | None) -> grpc.ChannelCredentials | None:
    if credentials is not None:
        return credentials
    return grpc.ssl_channel_credentials() if secure else None


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


def call_settings(api_key: str, agent_id: str | None, retry: RetryPolicy, default_timeout: float | None) -> CallSettings:
    if default_timeout is not None and default_timeout <= 0:
        raise ValueError("default_timeout must be positive or None")
    return CallSettings(auth_metadata(api_key, agent_id), retry, default_timeout)


def rpcs(channel: Any) -> dict[str, Any]:
    """Every RPC of the three services on channel, by method name (unique across them, so one
    flat table serves every client). The values are gRPC multi-callables, typed Any as gRPC
    ships no type information."""
    return {name: rpc for stub in _STUBS for name, rpc in vars(stub(channel)).items()}


def deadline_after(timeout: float | None) -> float | None:
    """The monotonic time a watch with this timeout ends at (None: never)."""
    return None if timeout is None else time.monotonic() + timeout


def stream_state(settings: CallSettings, resume: bool, deadline: float | None) -> RetryState:
    """The retry state of a watch stream from now on; its budget starts again with every
    response received."""
    remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
    return RetryState(settings.retry, retryable=resume, timeout=remaining)


def retry_code(exc: grpc.RpcError, closed: bool) -> grpc.StatusCode | None:
    """The code a failed attempt's retry is decided by (None: its own). A server stopping
    cancels the calls that reach it just as it stops, and past its grace time those still
    running: a call the policy may retry (a read, or a mutation with its request_id, which the
    server deduplicates) is sent again as after UNAVAILABLE, and a broken watch resumes after its
    last position. A call cancelled by this client's own close is not."""
    return grpc.StatusCode.UNAVAILABLE if exc.code() == grpc.StatusCode.CANCELLED and not closed else None
