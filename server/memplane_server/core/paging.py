"""Opaque page tokens: the keyset position of the last item, never an offset."""
from __future__ import annotations

import base64
import json
from typing import Any

from .errors import invalid


def encode_token(position: list[Any]) -> str:
    raw = json.dumps(position, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str, size: int) -> list[Any] | None:
    if not token:
        return None
    try:
        padded = token + "=" * (-len(token) % 4)
        position = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise invalid("INVALID_PAGE_TOKEN", "page_token is not one this server issued") from None
    if not isinstance(position, list) or len(position) != size:
        raise invalid("INVALID_PAGE_TOKEN", "page_token is not one this server issued")
    return position
