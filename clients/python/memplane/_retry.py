"""Retry policy and the per-call retry decisions shared by the sync and async transports."""
from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

import grpc
from google.protobuf.message import Message

from .errors import MemplaneError

#: Calls that are safe to send again as they are: reads, and settings whose repeat leaves the
#: state the first left. Every other call changes state, and repeating it blindly could apply it
#: twice (a conflict resolved, a consolidation or lifecycle run, a memory written): it is retried
#: only when its request carries a request_id the server deduplicates on. A stub of any language
#: gets the same list as its retry policy from proto/memplane/v1/service_config.json.
REPEATABLE_METHODS = frozenset({
    "Search", "GetMemory", "ListMemories", "ListMemoryHistory", "GetWorkingMemory", "GetStats",
    "ListConflicts", "Foresee", "ListReflectionDecisions", "Watch",
    "GetTenant", "ListTenants", "ListAgents", "ListApiKeys", "ListDomains", "ListDomainGrants",
    "ListAuditEvents", "GetLifecyclePolicy", "GetContentPolicy", "ScanContentPolicy", "GetTokenUsage", "GetUsage",
    "SetLifecyclePolicy", "SetContentPolicy", "SetTokenBudget",
    "GetOperation", "ListOperations",
})

_REQUEST_ID = "request_id"


@dataclass(frozen=True)
class RetryPolicy:
    """How failed calls are retried: exponential backoff with full jitter, within a time budget.

    The n-th retry waits a uniformly random time in [0, min(max_backoff,
    initial_backoff * multiplier ** (n - 1))], or exactly the server's retry_after when the
    error carries one. Retries go on while the call's deadline (its timeout) and the budget,
    counted from the first try, both leave time for the wait: the default 20 s outlasts a
    server restart and an idempotency claim left by a crashed server (5 s). max_attempts, when
    set, also caps the tries (it counts the first, so 1 disables retries).
    """

    max_attempts: int | None = None
    budget: float = 20.0
    initial_backoff: float = 0.1
    max_backoff: float = 2.0
    multiplier: float = 2.0
    retryable_codes: frozenset[grpc.StatusCode] = field(
        # ABORTED: the server rolled the call back for a concurrent one, so sending it again is safe.
        default=frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.ABORTED})
    )

    def __post_init__(self) -> None:
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.budget < 0:
            raise ValueError("budget must not be negative")
        if self.initial_backoff < 0 or self.max_backoff < 0:
            raise ValueError("backoff times must not be negative")
        if self.multiplier < 1:
            raise ValueError("multiplier must be at least 1")

    def backoff_ceiling(self, retry_number: int) -> float:
        """Upper bound of the wait before the retry_number-th retry (1-based)."""
        return min(self.max_backoff, self.initial_backoff * self.multiplier ** (retry_number - 1))

    def backoff(self, retry_number: int, rng: Callable[[], float] = random.random) -> float:
        """A full-jitter wait before the retry_number-th retry; rng returns values in [0, 1)."""
        return rng() * self.backoff_ceiling(retry_number)


def ensure_request_id(request: Message) -> None:
    """Gives a request that has a request_id field a fresh uuid4 unless the caller set one.

    Done once per logical call, before the first attempt, so every retry carries the same id
    and the server answers a repeat with the first response instead of applying it again.
    """
    if _REQUEST_ID in request.DESCRIPTOR.fields_by_name and not getattr(request, _REQUEST_ID):
        setattr(request, _REQUEST_ID, str(uuid.uuid4()))


def is_retryable_call(method: str, request: Message) -> bool:
    """Whether a call may be retried at all: reads always, mutations only with a request_id."""
    if method in REPEATABLE_METHODS:
        return True
    return bool(request.DESCRIPTOR.fields_by_name.get(_REQUEST_ID) and getattr(request, _REQUEST_ID))


class RetryState:
    """One logical call's attempts against its overall deadline.

    The caller's timeout bounds the whole call, retries and waits included, so each attempt
    gets only what is left of it.
    """

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        retryable: bool,
        timeout: float | None,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self._policy = policy
        self._retryable = retryable
        self._clock = clock
        self._rng = rng
        self._deadline = None if timeout is None else clock() + timeout
        self._budget_end = clock() + policy.budget
        self.attempts = 0

    def next_attempt_timeout(self) -> float | None:
        """Counts a new attempt and returns its timeout: the time left until the deadline."""
        self.attempts += 1
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - self._clock())

    def delay_before_retry(self, error: MemplaneError, code: grpc.StatusCode | None = None) -> float | None:
        """Seconds to wait before retrying after error (decided as if by `code` when given), or
        None when the call must fail now."""
        if not self._retryable or (code or error.code) not in self._policy.retryable_codes:
            return None
        if self._policy.max_attempts is not None and self.attempts >= self._policy.max_attempts:
            return None
        delay = error.retry_after if error.retry_after is not None else self._policy.backoff(self.attempts, self._rng)
        # Waiting past the deadline would only end in DEADLINE_EXCEEDED; the real error is more useful.
        ends = self._budget_end if self._deadline is None else min(self._deadline, self._budget_end)
        if self._clock() + delay >= ends:
            return None
        return delay
