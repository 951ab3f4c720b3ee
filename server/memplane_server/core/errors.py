"""The one domain error type; the API layer maps it to google.rpc.Status in one interceptor."""
from __future__ import annotations

import enum


class Code(enum.Enum):
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    UNAVAILABLE = "UNAVAILABLE"
    ABORTED = "ABORTED"  # lost to a concurrent transaction; nothing kept, retryable
    INTERNAL = "INTERNAL"


class MemplaneError(Exception):
    """A failure with a stable UPPER_SNAKE reason a client can act on."""

    def __init__(
        self, code: Code, reason: str, message: str, *, retry_after: float | None = None, **metadata: str
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        # Seconds the client should wait before trying again (sent as google.rpc.RetryInfo).
        self.retry_after = retry_after
        self.metadata = {k: str(v) for k, v in metadata.items()}


def invalid(reason: str, message: str, **metadata: str) -> MemplaneError:
    return MemplaneError(Code.INVALID_ARGUMENT, reason, message, retry_after=None, **metadata)


def not_found(what: str) -> MemplaneError:
    # Says nothing about whether the thing exists elsewhere: another tenant's id and an
    # unknown id must be indistinguishable.
    return MemplaneError(Code.NOT_FOUND, f"{what.upper()}_NOT_FOUND", f"{what} not found")


def denied(reason: str, message: str) -> MemplaneError:
    return MemplaneError(Code.PERMISSION_DENIED, reason, message)


def request_id_reused() -> MemplaneError:
    """A request_id its caller already used for a different request (seen in Redis or PostgreSQL)."""
    return MemplaneError(Code.FAILED_PRECONDITION, "REQUEST_ID_REUSED", "request_id was used with a different request")
