"""Opaque page tokens: the keyset position of the last item, never an offset."""
from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime
from typing import Any

from .errors import invalid
from .model import MemoryRecord
from .validation import EARLIEST_TIME, LATEST_TIME, MAX_FREE_ID_BYTES, MAX_PAGE_TOKEN_BYTES

_INT64 = (-2**63, 2**63 - 1)


def encode_token(position: list[Any]) -> str:
    raw = json.dumps(position, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def record_token(last: MemoryRecord) -> str:
    """The token of a page of memories in (created_at, id) order that ends at `last`."""
    assert last.created_at is not None, "read from the memories table, where it is NOT NULL"
    return encode_token([last.created_at.isoformat(), str(last.id)])


def _not_ours() -> Exception:
    return invalid("INVALID_PAGE_TOKEN", "page_token is not one this server issued")


def decode_token(token: str, size: int) -> list[Any] | None:
    if not token:
        return None
    if len(token) > MAX_PAGE_TOKEN_BYTES:
        raise _not_ours()
    try:
        padded = token + "=" * (-len(token) % 4)
        position = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise _not_ours() from None
    if not isinstance(position, list) or len(position) != size:
        raise _not_ours()
    return position


def decode_position(token: str, *kinds: str) -> tuple[Any, ...] | None:
    """A token's position with each part checked to be what the query binds it as: "time" (an
    aware time in the stored range), "uuid", "text" (an id) or "int" (a bigint). A token made by
    hand that decodes to anything else is INVALID_PAGE_TOKEN, never a failing query."""
    position = decode_token(token, len(kinds))
    if position is None:
        return None
    return tuple(_part(value, kind) for value, kind in zip(position, kinds))


def _part(value: Any, kind: str) -> Any:
    try:
        if kind == "time":
            moment = datetime.fromisoformat(value)
            if moment.tzinfo is None or not EARLIEST_TIME <= moment <= LATEST_TIME:
                raise ValueError(value)
            return moment
        if kind == "uuid":
            return uuid.UUID(value)
        if kind == "text":
            if not isinstance(value, str) or "\x00" in value or len(value.encode()) > MAX_FREE_ID_BYTES:
                raise ValueError(value)
            return value
        if kind == "int":
            if type(value) is not int or not _INT64[0] <= value <= _INT64[1]:
                raise ValueError(value)
            return value
    except (TypeError, ValueError, AttributeError):
        raise _not_ours() from None
    raise AssertionError(f"unknown position kind {kind}")
