"""Operation -> protobuf Operation."""
from __future__ import annotations

from memplane.v1 import operation_pb2 as opb

from ..core.forget.erasure import Receipt, receipt_from_json
from ..core.operations import Operation
from .convert import ts_out

STATES = {"pending": opb.OPERATION_STATE_PENDING, "running": opb.OPERATION_STATE_RUNNING,
          "succeeded": opb.OPERATION_STATE_SUCCEEDED, "failed": opb.OPERATION_STATE_FAILED,
          "cancelled": opb.OPERATION_STATE_CANCELLED}


def operation_out(op: Operation, target: opb.Operation) -> None:
    target.id = str(op.id)
    target.type = op.type
    target.state = STATES[op.state]
    target.attempts = op.attempts
    target.error_reason = op.error_reason
    target.error_message = op.error_message
    ts_out(target.create_time, op.created_at)
    ts_out(target.update_time, op.updated_at)
    target.result_memory_ids.extend(op.result_memory_ids)
    target.result_summary = op.result_summary
    if op.result_receipt:
        receipt_out(receipt_from_json(op.result_receipt), target.erasure_receipt)


def receipt_out(receipt: Receipt, target: opb.ErasureReceipt) -> None:
    target.operation_id = receipt.operation_id
    ts_out(target.erase_time, receipt.erase_time)
    target.subject = receipt.subject
    target.counts.update(receipt.counts)
    target.dry_run = receipt.dry_run
