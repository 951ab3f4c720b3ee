"""Exceptions raised by the SDK, mapped from gRPC status codes and google.rpc error details."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

_DETAILS_KEY = "grpc-status-details-bin"


class MemplaneError(Exception):
    """A failed Memplane call.

    Attributes:
        code: The gRPC status code.
        reason: Stable UPPER_SNAKE reason from the server's google.rpc.ErrorInfo, or "".
        message: Human-readable description.
        metadata: Key/value context from the ErrorInfo (e.g. the offending field).
        retry_after: Seconds the server asked the client to wait (google.rpc.RetryInfo), or None.
    """

    def __init__(
        self,
        message: str,
        *,
        code: grpc.StatusCode = grpc.StatusCode.UNKNOWN,
        reason: str = "",
        metadata: Mapping[str, str] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.metadata = dict(metadata or {})
        self.retry_after = retry_after

    def __str__(self) -> str:
        reason = f" [{self.reason}]" if self.reason else ""
        return f"{self.code.name}{reason}: {self.message}"


class InvalidArgumentError(MemplaneError):
    """The request was malformed or violated a limit (INVALID_ARGUMENT)."""


class NotFoundError(MemplaneError):
    """The addressed resource does not exist or is not visible to the caller (NOT_FOUND)."""


class AlreadyExistsError(MemplaneError):
    """The resource to create exists already (ALREADY_EXISTS)."""


class PermissionDeniedError(MemplaneError):
    """The API key may not perform the call (PERMISSION_DENIED)."""


class UnauthenticatedError(MemplaneError):
    """The API key is missing, unknown or revoked (UNAUTHENTICATED)."""


class ResourceExhaustedError(MemplaneError):
    """A rate limit or quota was hit (RESOURCE_EXHAUSTED); see retry_after."""


class FailedPreconditionError(MemplaneError):
    """The system is not in a state that allows the call (FAILED_PRECONDITION)."""


class UnavailableError(MemplaneError):
    """The server or one of its dependencies is temporarily unreachable (UNAVAILABLE)."""


class AbortedError(MemplaneError):
    """A concurrent change won and nothing of the call was kept (ABORTED); retried by default."""


class DeadlineExceededError(MemplaneError):
    """The call did not finish before its deadline (DEADLINE_EXCEEDED)."""


_BY_CODE: dict[grpc.StatusCode, type[MemplaneError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.ABORTED: AbortedError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
}


def error_class(code: grpc.StatusCode) -> type[MemplaneError]:
    """Returns the exception class raised for a status code (MemplaneError for unmapped codes)."""
    return _BY_CODE.get(code, MemplaneError)


def from_rpc_error(error: grpc.RpcError) -> MemplaneError:
    """Converts a failed call (sync grpc.RpcError or grpc.aio.AioRpcError) into a MemplaneError.

    Both kinds expose code(), details() and trailing_metadata() synchronously, so one parser
    serves both; grpc_status.rpc_status.from_call is avoided because it raises on a
    code/message mismatch, and mapping an error must never itself fail.
    """
    code = _call_attr(error, "code") or grpc.StatusCode.UNKNOWN
    status = _rich_status(_call_attr(error, "trailing_metadata") or ())
    message = _call_attr(error, "details") or (status.message if status else "") or str(error)
    reason, metadata, retry_after = "", {}, None
    for detail in status.details if status else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason, metadata = info.reason, dict(info.metadata)
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            retry_after = retry.retry_delay.ToTimedelta().total_seconds()
    return error_class(code)(message, code=code, reason=reason, metadata=metadata, retry_after=retry_after)


def _call_attr(error: grpc.RpcError, name: str) -> Any:
    # A bare grpc.RpcError (not a grpc.Call) has none of these accessors.
    accessor = getattr(error, name, None)
    return accessor() if callable(accessor) else None


def _rich_status(trailing_metadata: Iterable[tuple[str, Any]]) -> status_pb2.Status | None:
    for key, value in trailing_metadata:
        if key == _DETAILS_KEY:
            try:
                return status_pb2.Status.FromString(value)
            except (DecodeError, TypeError):
                return None
    return None
