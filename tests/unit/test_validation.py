"""Input rules shared by every use case (core/validation.py)."""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import MemoryFilter, Scope
from memplane_server.core.validation import (
    EARLIEST_TIME,
    LATEST_TIME,
    MAX_METADATA_BYTES,
    MAX_METADATA_DEPTH,
    MAX_TAGS,
    MAX_WORKING_TTL_SECONDS,
    check_confidence,
    check_content,
    check_filter,
    check_free_id,
    check_identifier,
    check_metadata,
    check_tags,
    check_text,
    check_time,
    check_ttl,
    clamp_page_size,
    shown,
)


def _reason(exc: pytest.ExceptionInfo) -> str:
    assert exc.value.code is Code.INVALID_ARGUMENT
    return exc.value.reason


@pytest.mark.parametrize("value", ["a", "acme", "team-1", "t_2", "0abc", "a" * 63])
def test_identifier_accepts_small_alphabet_up_to_63_chars(value):
    assert check_identifier(value, "tenant") == value


@pytest.mark.parametrize("value", ["", "Acme", "-acme", "_acme", "a b", "a.b", "a/b", "é", "a" * 64])
def test_identifier_rejects_other_values_with_reason_naming_the_kind(value):
    with pytest.raises(MemplaneError) as exc:
        check_identifier(value, "tenant")
    assert _reason(exc) == "INVALID_TENANT_ID"


def test_identifier_reason_follows_what_argument():
    with pytest.raises(MemplaneError) as exc:
        check_identifier("Bad", "domain")
    assert _reason(exc) == "INVALID_DOMAIN_ID"


def test_identifier_rejects_trailing_newline():
    with pytest.raises(MemplaneError):
        check_identifier("acme\n", "tenant")


@pytest.mark.parametrize("value", [None, ""])
def test_free_id_empty_means_none(value):
    assert check_free_id(value, "user_id") is None


def test_free_id_accepts_any_text_within_256_bytes():
    value = "用户 #1/é" + "x" * 200
    assert len(value.encode()) <= 256
    assert check_free_id(value, "user_id") == value


def test_free_id_limit_counts_utf8_bytes_not_characters():
    assert check_free_id("x" * 256, "user_id") == "x" * 256
    with pytest.raises(MemplaneError) as exc:
        check_free_id("é" * 129, "user_id")  # 129 characters, 258 bytes
    assert _reason(exc) == "INVALID_USER_ID"


def test_free_id_rejects_nul():
    with pytest.raises(MemplaneError) as exc:
        check_free_id("a\x00b", "session_id")
    assert _reason(exc) == "INVALID_SESSION_ID"


def test_content_is_returned_unchanged_when_valid():
    assert check_content("  hello  ", 100) == "  hello  "


@pytest.mark.parametrize("content", ["", "   ", "\n\t"])
def test_content_empty_or_blank_is_required(content):
    with pytest.raises(MemplaneError) as exc:
        check_content(content, 100)
    assert _reason(exc) == "CONTENT_REQUIRED"


def test_content_with_nul_is_invalid():
    with pytest.raises(MemplaneError) as exc:
        check_content("a\x00b", 100)
    assert _reason(exc) == "INVALID_CONTENT"


def test_content_over_limit_is_too_large_with_limit_metadata():
    with pytest.raises(MemplaneError) as exc:
        check_content("é" * 6, 10)  # 12 bytes
    assert _reason(exc) == "CONTENT_TOO_LARGE"
    assert exc.value.metadata == {"limit": "10"}
    assert "12 bytes" in exc.value.message


def test_content_exactly_at_limit_is_accepted():
    assert check_content("é" * 5, 10) == "é" * 5


def test_content_reasons_follow_what_argument():
    with pytest.raises(MemplaneError) as exc:
        check_content("", 10, "request")
    assert _reason(exc) == "REQUEST_REQUIRED"


@pytest.mark.parametrize("value", [0.0, 0.5, 1.0])
def test_confidence_in_unit_interval_is_accepted(value):
    assert check_confidence(value) == value


@pytest.mark.parametrize("value", [math.nan, -0.01, 1.01, math.inf, -math.inf])
def test_confidence_nan_or_outside_unit_interval_is_invalid(value):
    with pytest.raises(MemplaneError) as exc:
        check_confidence(value)
    assert _reason(exc) == "INVALID_CONFIDENCE"


def test_page_size_zero_means_default():
    assert clamp_page_size(0) == 50
    assert clamp_page_size(0, default=7) == 7


def test_page_size_within_maximum_is_kept():
    assert clamp_page_size(120) == 120


def test_page_size_above_maximum_is_capped():
    assert clamp_page_size(10_000) == 500
    assert clamp_page_size(11, maximum=10) == 10


def test_page_size_negative_is_invalid():
    with pytest.raises(MemplaneError) as exc:
        clamp_page_size(-1)
    assert _reason(exc) == "INVALID_PAGE_SIZE"


# --- limits shared by every RPC ---------------------------------------------------------------

def _fails(fn, *args) -> MemplaneError:
    with pytest.raises(MemplaneError) as exc:
        fn(*args)
    assert exc.value.code is Code.INVALID_ARGUMENT
    assert len(exc.value.message) < 300  # never an echo of a large input
    return exc.value


def test_text_may_be_empty_but_not_hold_nul_or_exceed_its_limit():
    assert check_text("", "comment", 10) == ""
    assert _fails(check_text, "a\x00b", "comment", 10).reason == "INVALID_COMMENT"
    err = _fails(check_text, "x" * 1_000_000, "value", 10)
    assert (err.reason, err.metadata) == ("VALUE_TOO_LARGE", {"limit": "10"})


def test_tags_are_bounded_in_number_and_each_like_an_id():
    check_tags(["t"] * MAX_TAGS)
    assert _fails(check_tags, ["t"] * (MAX_TAGS + 1)).reason == "TOO_MANY_TAGS"
    assert _fails(check_tags, ["ok", "a\x00"]).reason == "INVALID_TAG"
    assert _fails(check_tags, ["x" * 257]).reason == "INVALID_TAG"


@pytest.mark.parametrize("moment", [EARLIEST_TIME, LATEST_TIME, datetime(2024, 5, 1, tzinfo=timezone.utc)])
def test_times_inside_the_storable_range_pass(moment):
    assert check_time(moment, "occurred_at") is moment


@pytest.mark.parametrize("moment", [
    datetime(1, 1, 1, tzinfo=timezone.utc),  # asyncpg stores this as -infinity
    EARLIEST_TIME - timedelta(microseconds=1),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),  # ... and this as infinity
    LATEST_TIME + timedelta(microseconds=1),
])
def test_times_at_the_ends_of_the_calendar_are_invalid_timestamp(moment):
    err = _fails(check_time, moment, "valid_to")
    assert (err.reason, err.metadata) == ("INVALID_TIMESTAMP", {"field": "valid_to"})


def test_ttl_is_a_positive_number_of_seconds_up_to_366_days():
    assert check_ttl(1) == 1 and check_ttl(MAX_WORKING_TTL_SECONDS) == MAX_WORKING_TTL_SECONDS
    for seconds in (0, -1, MAX_WORKING_TTL_SECONDS + 1, 10**12):
        assert _fails(check_ttl, seconds).reason == "INVALID_TTL"


@pytest.mark.parametrize("data", [
    {"n": math.nan}, {"n": math.inf}, {"n": -math.inf}, {"list": [1.0, math.nan]}, {"a": {"b": math.inf}},
    {"k": "a\x00b"}, {"a\x00": 1}, {"a": [{"b\x00": None}]},
])
def test_metadata_that_jsonb_refuses_is_invalid_metadata(data):
    err = _fails(check_metadata, data)
    assert (err.reason, err.metadata) == ("INVALID_METADATA", {"field": "metadata"})


def _nested(depth: int) -> dict:
    data: dict = {"leaf": 1}
    for _ in range(depth - 1):
        data = {"d": data}
    return data


def test_metadata_nesting_is_bounded():
    assert check_metadata(_nested(MAX_METADATA_DEPTH))
    assert _fails(check_metadata, _nested(MAX_METADATA_DEPTH + 1)).reason == "INVALID_METADATA"


def test_metadata_size_is_bounded_as_compact_json():
    check_metadata({"big": "x" * (MAX_METADATA_BYTES - 20)})
    err = _fails(check_metadata, {"big": "x" * 1_000_000})
    assert err.reason == "METADATA_TOO_LARGE" and err.metadata["limit"] == str(MAX_METADATA_BYTES)
    assert _fails(check_metadata, {f"k{i}": i for i in range(10_000)}).reason == "METADATA_TOO_LARGE"


def test_ordinary_metadata_passes_unchanged():
    data = {"k": "v", "n": 2.5, "ok": True, "none": None, "list": [1, "two", {"three": 3}], "": "empty key"}
    assert check_metadata(data) is data


@pytest.mark.parametrize("field, value, reason", [
    ("agent_id", "a\x00b", "INVALID_AGENT_ID"), ("user_id", "a\x00b", "INVALID_USER_ID"),
    ("session_id", "a\x00b", "INVALID_SESSION_ID"), ("entity", "a\x00b", "INVALID_ENTITY"),
    ("attribute", "x" * 300, "INVALID_ATTRIBUTE"), ("tags", ("ok", "a\x00"), "INVALID_TAG"),
    ("domains", ("a\x00b",), "INVALID_DOMAIN_ID"), ("domains", ("x" * 1_000_000,), "INVALID_DOMAIN_ID"),
    ("tags", ("t",) * 65, "TOO_MANY_FILTER_VALUES"), ("scopes", (Scope.GLOBAL,) * 65, "TOO_MANY_FILTER_VALUES"),
    ("occurred_after", datetime(1, 1, 1, tzinfo=timezone.utc), "INVALID_TIMESTAMP"),
    ("occurred_before", datetime(9999, 12, 31, tzinfo=timezone.utc), "INVALID_TIMESTAMP"),
])
def test_filter_values_postgres_would_refuse_are_invalid_argument(field, value, reason):
    assert _fails(check_filter, MemoryFilter(**{field: value})).reason == reason


def test_a_filter_of_ordinary_values_passes():
    f = MemoryFilter(domains=("payments",), agent_id="bot", user_id="用户 1", tags=("t",) * 64,
                     occurred_after=EARLIEST_TIME, occurred_before=LATEST_TIME)
    assert check_filter(f) is f


def test_shown_cuts_what_an_error_message_quotes():
    assert shown("abc") == "'abc'"
    assert len(shown("x" * 1_000_000)) < 80
