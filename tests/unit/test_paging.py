"""Opaque keyset page tokens (core/paging.py)."""
from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime, timezone

import pytest

from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.paging import decode_position, decode_token, encode_token


def _token_of(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_token_roundtrips_its_position():
    position = ["2024-01-01T00:00:00+00:00", "0b5e7f2a-1111-2222-3333-444455556666", 0.25, 7]
    assert decode_token(encode_token(position), 4) == position


def test_token_is_url_safe_without_padding():
    token = encode_token(["???>>>", "é" * 5])
    assert "=" not in token
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_empty_token_means_first_page():
    assert decode_token("", 2) is None


def _reason_of(token: str, size: int = 2) -> str:
    with pytest.raises(MemplaneError) as exc:
        decode_token(token, size)
    assert exc.value.code is Code.INVALID_ARGUMENT
    return exc.value.reason


@pytest.mark.parametrize("token", ["not a token!!", "a", "%%%%", _token_of(b"{not json"), _token_of(b"\xff\xfe\x00")])
def test_garbage_token_is_invalid_page_token(token):
    assert _reason_of(token) == "INVALID_PAGE_TOKEN"


def test_token_with_wrong_position_length_is_invalid():
    assert _reason_of(encode_token(["a", "b", "c"]), 2) == "INVALID_PAGE_TOKEN"
    assert _reason_of(encode_token(["a"]), 2) == "INVALID_PAGE_TOKEN"


def test_token_decoding_to_non_list_json_is_invalid():
    assert _reason_of(_token_of(json.dumps({"a": 1, "b": 2}).encode())) == "INVALID_PAGE_TOKEN"


def test_deeply_nested_token_is_invalid_page_token():
    assert _reason_of(_token_of(b"[" * 100_000)) == "INVALID_PAGE_TOKEN"


# --- decode_position: each part is what the query binds it as ---------------------------------

def test_position_parts_come_back_typed():
    moment, key = datetime(2024, 1, 1, 8, tzinfo=timezone.utc), uuid.uuid4()
    assert decode_position(encode_token([moment.isoformat(), str(key)]), "time", "uuid") == (moment, key)
    assert decode_position(encode_token(["acme"]), "text") == ("acme",)
    assert decode_position(encode_token([42]), "int") == (42,)
    assert decode_position("", "int") is None


@pytest.mark.parametrize("position, kinds", [
    (["2024-01-01T00:00:00", "5f0c6b1e-3a52-4d7e-9a0b-8c1d2e3f4a5b"], ("time", "uuid")),  # naive
    (["0001-01-01T00:00:00+00:00", "5f0c6b1e-3a52-4d7e-9a0b-8c1d2e3f4a5b"], ("time", "uuid")),  # -infinity
    (["+99999-01-01", "x"], ("time", "uuid")),
    ([1, 2], ("time", "uuid")),
    (["2024-01-01T00:00:00+00:00", "not-a-uuid"], ("time", "uuid")),
    ([10**30], ("text",)), ([1.5], ("text",)), ([{"a": 1}], ("text",)), ([[]], ("text",)), (["\x00"], ("text",)),
    (["x" * 300], ("text",)),
    (["a"], ("int",)), ([True], ("int",)), ([2**63], ("int",)), ([None], ("int",)),
])
def test_position_of_the_wrong_type_is_invalid_page_token(position, kinds):
    # Each of these reached a query before (asyncpg DataError, OverflowError): INTERNAL.
    with pytest.raises(MemplaneError) as exc:
        decode_position(encode_token(position), *kinds)
    assert exc.value.reason == "INVALID_PAGE_TOKEN"


def test_overlong_token_is_invalid_without_decoding():
    assert _reason_of("A" * 2000, 1) == "INVALID_PAGE_TOKEN"
