"""Mapping failed gRPC calls to MemplaneError subclasses with their rich details."""
from __future__ import annotations

import grpc
import grpc.aio
import pytest
from google.protobuf.any_pb2 import Any
from google.protobuf.duration_pb2 import Duration
from google.rpc import error_details_pb2, status_pb2

from memplane import errors


class FakeRpcError(grpc.RpcError, grpc.Call):
    """A failed sync call as grpc raises it: code, details and trailing metadata."""

    def __init__(self, code, details="", trailing=()):
        self._code, self._details, self._trailing = code, details, tuple(trailing)

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._trailing

    def initial_metadata(self):
        return ()

    def is_active(self):
        return False

    def time_remaining(self):
        return None

    def cancel(self):
        return False

    def add_callback(self, callback):
        return False


def packed(*details, code=grpc.StatusCode.RESOURCE_EXHAUSTED, message="slow down"):
    status = status_pb2.Status(code=code.value[0], message=message)
    for detail in details:
        any_detail = Any()
        any_detail.Pack(detail)
        status.details.append(any_detail)
    return [("grpc-status-details-bin", status.SerializeToString())]


ERROR_INFO = error_details_pb2.ErrorInfo(reason="RATE_LIMITED", domain="memplane.dev", metadata={"limit": "100"})
RETRY_INFO = error_details_pb2.RetryInfo(retry_delay=Duration(seconds=2, nanos=500_000_000))


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, errors.InvalidArgumentError),
        (grpc.StatusCode.NOT_FOUND, errors.NotFoundError),
        (grpc.StatusCode.ALREADY_EXISTS, errors.AlreadyExistsError),
        (grpc.StatusCode.PERMISSION_DENIED, errors.PermissionDeniedError),
        (grpc.StatusCode.UNAUTHENTICATED, errors.UnauthenticatedError),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, errors.ResourceExhaustedError),
        (grpc.StatusCode.FAILED_PRECONDITION, errors.FailedPreconditionError),
        (grpc.StatusCode.UNAVAILABLE, errors.UnavailableError),
        (grpc.StatusCode.ABORTED, errors.AbortedError),
        (grpc.StatusCode.DEADLINE_EXCEEDED, errors.DeadlineExceededError),
    ],
)
def test_each_status_code_maps_to_its_subclass(code, cls):
    error = errors.from_rpc_error(FakeRpcError(code, "boom"))
    assert type(error) is cls
    assert error.code is code


def test_unmapped_codes_become_the_base_error():
    error = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.INTERNAL, "boom"))
    assert type(error) is errors.MemplaneError


def test_reason_and_metadata_come_from_error_info():
    error = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "slow down", packed(ERROR_INFO)))
    assert (error.reason, error.metadata, error.message) == ("RATE_LIMITED", {"limit": "100"}, "slow down")


def test_retry_after_comes_from_retry_info_in_seconds():
    error = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "slow down", packed(RETRY_INFO)))
    assert error.retry_after == 2.5


def test_without_details_reason_is_empty_and_retry_after_none():
    error = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "down"))
    assert (error.reason, error.metadata, error.retry_after) == ("", {}, None)


def test_malformed_details_are_ignored_rather_than_raising():
    trailing = [("grpc-status-details-bin", b"\xff\xff not a status")]
    error = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "down", trailing))
    assert type(error) is errors.UnavailableError and error.reason == ""


def test_message_falls_back_to_the_status_message():
    error = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "", packed(ERROR_INFO)))
    assert error.message == "slow down"


def test_aio_errors_map_the_same_way():
    trailing = grpc.aio.Metadata(*packed(ERROR_INFO, RETRY_INFO))
    aio_error = grpc.aio.AioRpcError(
        grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.aio.Metadata(), trailing, details="slow down"
    )
    error = errors.from_rpc_error(aio_error)
    assert type(error) is errors.ResourceExhaustedError
    assert (error.reason, error.retry_after) == ("RATE_LIMITED", 2.5)


def test_str_shows_code_reason_and_message():
    error = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "slow down", packed(ERROR_INFO)))
    assert str(error) == "RESOURCE_EXHAUSTED [RATE_LIMITED]: slow down"
