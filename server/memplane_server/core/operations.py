"""Domain types of background work: a job as the worker runs it, and the operation its caller
polls and cancels."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

STATES = ("pending", "running", "succeeded", "failed", "cancelled")


@dataclass(frozen=True)
class Operation:
    """A job as its caller sees it. A failed attempt that will be retried reads as pending."""

    id: uuid.UUID
    type: str
    state: str  # one of STATES
    attempts: int
    error_reason: str
    error_message: str
    created_at: datetime
    updated_at: datetime
    result_memory_ids: tuple[str, ...] = ()
    result_summary: str = ""
    result_receipt: dict[str, Any] | None = None  # an erasure's receipt (core/erasure.receipt_to_json)


@dataclass(frozen=True)
class Job:
    """A job claimed by a worker: what to run, for whom, and how often it was tried."""

    id: uuid.UUID
    type: str
    payload: dict[str, Any]
    # The enqueuing caller as stored (core/caller.caller_to_json). The runner parses it, so a
    # document that no longer parses fails its job instead of the claim.
    caller: dict[str, Any]
    attempts: int  # including this one
