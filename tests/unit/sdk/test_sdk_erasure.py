"""The SDK's erasure call and forget-everything flag: the requests they build and the typed results."""
from __future__ import annotations

import pytest

from memplane import EraseMode, ErasureReceipt, _convert, _requests
from memplane.v1 import memory_service_pb2 as svc_pb


def test_erase_user_builds_a_forget_with_an_erasure_target():
    call = _requests.erase_user("u-42", mode="async", dry_run=True, reason="gdpr", request_id="r1")
    r = call.request
    assert call.method == "Forget" and r.WhichOneof("target") == "erase_user_id" and r.erase_user_id == "u-42"
    assert r.erase_mode == svc_pb.ERASE_MODE_ASYNC and r.dry_run and r.reason == "gdpr" and r.request_id == "r1"
    assert _requests.erase_user("u", mode=None, dry_run=False, reason="", request_id=None).request.erase_mode == 0


def test_erase_user_needs_a_user():
    with pytest.raises(ValueError):
        _requests.erase_user("", mode=None, dry_run=False, reason="", request_id=None)


def test_forget_everything_alone_or_with_a_filter_but_not_with_ids():
    alone = _requests.forget(ids=None, hard=True, dry_run=False, reason="", request_id=None, filters={}, everything=True)
    assert alone.request.everything and alone.request.WhichOneof("target") is None
    narrowed = _requests.forget(ids=None, hard=False, dry_run=False, reason="", request_id=None,
                                filters={"user_id": "u1"}, everything=True)
    assert narrowed.request.WhichOneof("target") == "filter"
    with pytest.raises(ValueError):
        _requests.forget(ids=["x"], hard=False, dry_run=False, reason="", request_id=None, filters={}, everything=True)
    with pytest.raises(ValueError):
        _requests.forget(ids=None, hard=False, dry_run=False, reason="", request_id=None, filters={})


def test_the_receipt_and_the_operation_read_back_typed():
    response = svc_pb.ForgetResponse(forgotten_count=3)
    response.receipt.operation_id = "op-1"
    response.receipt.subject = "ab" * 32
    response.receipt.counts["postgres.memories"] = 3
    response.receipt.counts["redis.idempotency"] = 2
    response.receipt.erase_time.FromSeconds(1_800_000_000)
    result = _convert.erasure_result(response)
    assert isinstance(result.receipt, ErasureReceipt) and result.operation is None
    assert result.receipt.counts == {"postgres.memories": 3, "redis.idempotency": 2} and result.receipt.total == 5
    assert result.receipt.erase_time.year == 2027
    queued = svc_pb.ForgetResponse()
    queued.operation.id = "op-2"
    queued.operation.erasure_receipt.operation_id = "op-2"
    later = _convert.erasure_result(queued)
    assert later.receipt is None and later.operation.erasure_receipt.operation_id == "op-2"
    assert EraseMode.parse("sync") is EraseMode.SYNC
