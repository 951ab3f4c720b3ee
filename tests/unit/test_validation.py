"""Input rules shared by every use case (core/validation.py)."""
from __future__ import annotations

import math

import pytest

from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.validation import (
    check_confidence, check_content, check_free_id, check_identifier, clamp_page_size,
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
