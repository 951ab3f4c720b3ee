"""Retry decisions: which calls retry on which codes, request ids, backoff and deadlines."""
from __future__ import annotations

import uuid

import grpc
import pytest

from memplane._retry import RetryPolicy, RetryState, ensure_request_id, is_retryable_call
from memplane.errors import MemplaneError, error_class
from memplane.v1 import admin_service_pb2 as admin_pb
from memplane.v1 import memory_service_pb2 as svc_pb
from memplane.v1 import operations_service_pb2 as ops_pb

UNAVAILABLE = grpc.StatusCode.UNAVAILABLE
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED


def error(code: grpc.StatusCode, retry_after: float | None = None) -> MemplaneError:
    return error_class(code)("x", code=code, retry_after=retry_after)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def first_delay(method: str, request, code: grpc.StatusCode) -> float | None:
    state = RetryState(RetryPolicy(), retryable=is_retryable_call(method, request), timeout=None, rng=lambda: 0.5)
    state.next_attempt_timeout()
    return state.delay_before_retry(error(code))


@pytest.mark.parametrize(
    ("method", "request_", "code", "retries"),
    [
        ("Search", svc_pb.SearchRequest(query="q"), UNAVAILABLE, True),
        ("GetMemory", svc_pb.GetMemoryRequest(id="m"), EXHAUSTED, True),
        ("ListTenants", admin_pb.ListTenantsRequest(), UNAVAILABLE, True),
        ("GetOperation", ops_pb.GetOperationRequest(id="o"), UNAVAILABLE, True),
        ("Search", svc_pb.SearchRequest(query="q"), grpc.StatusCode.INVALID_ARGUMENT, False),
        ("Search", svc_pb.SearchRequest(query="q"), grpc.StatusCode.DEADLINE_EXCEEDED, False),
        ("Search", svc_pb.SearchRequest(query="q"), grpc.StatusCode.INTERNAL, False),
        ("Write", svc_pb.WriteRequest(request_id="r1"), UNAVAILABLE, True),
        ("Write", svc_pb.WriteRequest(), UNAVAILABLE, False),
        ("Forget", svc_pb.ForgetRequest(request_id="r1"), EXHAUSTED, True),
        ("Forget", svc_pb.ForgetRequest(request_id="r1"), grpc.StatusCode.ABORTED, True),
        ("UpdateMemory", svc_pb.UpdateMemoryRequest(), UNAVAILABLE, False),
        ("Reflect", svc_pb.ReflectRequest(request_id="r1"), UNAVAILABLE, True),
        ("SubmitFeedback", svc_pb.SubmitFeedbackRequest(memory_ids=["m"]), UNAVAILABLE, False),
        ("CreateTenant", admin_pb.CreateTenantRequest(), UNAVAILABLE, False),
        ("CreateApiKey", admin_pb.CreateApiKeyRequest(), UNAVAILABLE, False),
        ("GrantDomain", admin_pb.GrantDomainRequest(), UNAVAILABLE, False),
        ("RevokeApiKey", admin_pb.RevokeApiKeyRequest(), UNAVAILABLE, False),
        ("RevokeDomainGrant", admin_pb.RevokeDomainGrantRequest(), UNAVAILABLE, False),
        ("CancelOperation", ops_pb.CancelOperationRequest(id="o"), UNAVAILABLE, False),
    ],
)
def test_retry_decision_table(method, request_, code, retries):
    assert (first_delay(method, request_, code) is not None) is retries


def test_missing_request_id_is_filled_with_a_uuid4():
    request = svc_pb.WriteRequest()
    ensure_request_id(request)
    assert uuid.UUID(request.request_id).version == 4


def test_caller_request_id_is_kept():
    request = svc_pb.ForgetRequest(request_id="mine")
    ensure_request_id(request)
    assert request.request_id == "mine"


def test_requests_without_the_field_are_left_alone():
    request = svc_pb.SubmitFeedbackRequest(memory_ids=["m"])
    ensure_request_id(request)
    assert request == svc_pb.SubmitFeedbackRequest(memory_ids=["m"])


def test_backoff_ceiling_doubles_from_the_base_up_to_the_cap():
    policy = RetryPolicy()
    assert [policy.backoff_ceiling(n) for n in range(1, 9)] == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0]


@pytest.mark.parametrize("retry_number", [1, 3, 10])
def test_full_jitter_spans_zero_to_the_ceiling(retry_number):
    policy = RetryPolicy()
    assert policy.backoff(retry_number, rng=lambda: 0.0) == 0.0
    ceiling = policy.backoff_ceiling(retry_number)
    assert policy.backoff(retry_number, rng=lambda: 0.999999) == pytest.approx(ceiling, rel=1e-5)


def test_real_jitter_stays_within_bounds():
    policy = RetryPolicy()
    delays = [policy.backoff(3) for _ in range(500)]
    assert all(0.0 <= d <= 0.4 for d in delays) and len(set(delays)) > 1


def test_retry_after_replaces_the_backoff():
    state = RetryState(RetryPolicy(), retryable=True, timeout=None, rng=lambda: 0.0)
    state.next_attempt_timeout()
    assert state.delay_before_retry(error(EXHAUSTED, retry_after=1.5)) == 1.5


def test_gives_up_after_max_attempts():
    state = RetryState(RetryPolicy(max_attempts=4), retryable=True, timeout=None)
    delays = []
    for _ in range(4):
        state.next_attempt_timeout()
        delays.append(state.delay_before_retry(error(UNAVAILABLE)))
    assert [d is not None for d in delays] == [True, True, True, False]


def test_max_attempts_of_one_disables_retries():
    state = RetryState(RetryPolicy(max_attempts=1), retryable=True, timeout=None)
    state.next_attempt_timeout()
    assert state.delay_before_retry(error(UNAVAILABLE)) is None


def test_gives_up_when_the_wait_would_pass_the_deadline():
    clock = FakeClock()
    state = RetryState(RetryPolicy(), retryable=True, timeout=1.0, clock=clock)
    state.next_attempt_timeout()
    assert state.delay_before_retry(error(EXHAUSTED, retry_after=2.0)) is None


def test_each_attempt_gets_what_is_left_of_the_timeout():
    clock = FakeClock()
    state = RetryState(RetryPolicy(), retryable=True, timeout=10.0, clock=clock)
    assert state.next_attempt_timeout() == 10.0
    clock.now += 4.0
    assert state.next_attempt_timeout() == 6.0


def test_no_timeout_means_no_attempt_deadline():
    assert RetryState(RetryPolicy(), retryable=True, timeout=None).next_attempt_timeout() is None


@pytest.mark.parametrize(
    "kwargs", [{"max_attempts": 0}, {"initial_backoff": -1}, {"max_backoff": -1}, {"multiplier": 0.5}]
)
def test_policy_rejects_nonsense_settings(kwargs):
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)


def test_default_policy_keeps_retrying_through_a_restart():
    clock = FakeClock()
    state = RetryState(RetryPolicy(), retryable=True, timeout=30.0, clock=clock, rng=lambda: 1.0)
    waited = 0.0
    while True:
        state.next_attempt_timeout()
        delay = state.delay_before_retry(error(UNAVAILABLE))
        if delay is None:
            break
        clock.now += delay
        waited += delay
    # A restart takes 2-3 s and a crashed server's idempotency claim lapses after 5 s.
    assert 15.0 <= waited < 20.0
    assert state.attempts > 10


def test_the_budget_bounds_a_call_without_a_timeout():
    clock = FakeClock()
    state = RetryState(RetryPolicy(budget=3.0), retryable=True, timeout=None, clock=clock, rng=lambda: 1.0)
    state.next_attempt_timeout()
    clock.now += 2.9
    assert state.delay_before_retry(error(UNAVAILABLE)) is None


@pytest.mark.parametrize("kwargs", [{"budget": -1.0}])
def test_negative_budget_is_refused(kwargs):
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)
