"""to_status: MemplaneError -> grpc.Status carrying google.rpc.Status with ErrorInfo (api/interceptors.py)."""
from __future__ import annotations

import grpc
import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2

from memplane_server.api.interceptors import ERROR_DOMAIN, to_status
from memplane_server.core.errors import Code, MemplaneError, denied, invalid, not_found


def rich_status(status: grpc.Status) -> status_pb2.Status:
    details = dict(status.trailing_metadata)["grpc-status-details-bin"]
    return status_pb2.Status.FromString(details)


def error_info(status: grpc.Status) -> error_details_pb2.ErrorInfo:
    (detail,) = rich_status(status).details
    info = error_details_pb2.ErrorInfo()
    assert detail.Unpack(info)
    return info


def test_status_carries_grpc_code_and_message():
    status = to_status(invalid("CONTENT_TOO_LARGE", "content is too large", limit="10"))
    assert status.code is grpc.StatusCode.INVALID_ARGUMENT
    assert status.details == "content is too large"


def test_status_detail_is_error_info_with_reason_domain_and_metadata():
    info = error_info(to_status(invalid("CONTENT_TOO_LARGE", "too large", limit="10")))
    assert info.reason == "CONTENT_TOO_LARGE"
    assert info.domain == ERROR_DOMAIN == "memplane.dev"
    assert dict(info.metadata) == {"limit": "10"}


def test_rich_status_repeats_code_and_message():
    rich = rich_status(to_status(denied("READ_ONLY_KEY", "this key may not change memories")))
    assert rich.code == code_pb2.PERMISSION_DENIED
    assert rich.message == "this key may not change memories"


def test_not_found_error_maps_to_not_found_with_its_reason():
    status = to_status(not_found("memory"))
    assert status.code is grpc.StatusCode.NOT_FOUND
    assert error_info(status).reason == "MEMORY_NOT_FOUND"


@pytest.mark.parametrize("code", list(Code))
def test_every_domain_code_maps_to_the_same_named_grpc_code(code):
    status = to_status(MemplaneError(code, "SOME_REASON", "m"))
    assert status.code is grpc.StatusCode[code.value]
    assert rich_status(status).code == getattr(code_pb2, code.value)


def test_metadata_values_are_stringified():
    err = MemplaneError(Code.RESOURCE_EXHAUSTED, "TOO_MANY", "m", limit=5)
    assert dict(error_info(to_status(err)).metadata) == {"limit": "5"}


def test_a_long_input_in_the_message_is_cut_to_a_prefix_and_the_rest_of_the_message_kept():
    # A 5 KB detector name came back whole; from about 10 KB the client failed on the trailers' size.
    for size in (5_000, 20_000):
        name = "d" * size
        status = to_status(invalid("UNKNOWN_DETECTOR", f"no detector called {name!r}, see the docs"))
        assert status.details == f"no detector called '{'d' * 63}… see the docs"
        assert rich_status(status).message == status.details


def test_a_long_message_is_cut_to_512_bytes_of_whole_characters():
    status = to_status(invalid("X", "名字 " * 1_000))
    assert len(status.details.encode()) <= 512 and status.details.startswith("名字 名字") and status.details.endswith("…")


def test_error_info_metadata_values_are_bounded_too():
    info = error_info(to_status(invalid("CONTENT_POLICY", "m", field="metadata." + "k" * 20_000, detector="email")))
    assert info.metadata["field"] == "metadata." + "k" * 55 + "…"
    assert info.metadata["detector"] == "email"
