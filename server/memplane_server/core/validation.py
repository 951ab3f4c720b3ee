"""Input rules shared by every use case."""
from __future__ import annotations

import math
import re

from .errors import invalid

_IDENT = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
_FREE_ID_MAX = 256


def check_identifier(value: str, what: str) -> str:
    """Tenant, agent and domain ids: a small alphabet so they are safe in keys, logs and URLs."""
    if not _IDENT.fullmatch(value or ""):
        raise invalid(
            f"INVALID_{what.upper()}_ID",
            f"{what} id must be 1-63 characters of a-z, 0-9, '-' and '_', starting with a letter or digit",
        )
    return value


def check_free_id(value: str | None, what: str) -> str | None:
    """user_id, session_id and similar caller-chosen ids: any text, bounded."""
    if value is None or value == "":
        return None
    if len(value.encode()) > _FREE_ID_MAX or "\x00" in value:
        raise invalid(f"INVALID_{what.upper()}", f"{what} must be at most {_FREE_ID_MAX} bytes without NUL")
    return value


def check_content(content: str, max_bytes: int, what: str = "content") -> str:
    if not content or not content.strip():
        raise invalid(f"{what.upper()}_REQUIRED", f"{what} must not be empty")
    if "\x00" in content:
        raise invalid(f"INVALID_{what.upper()}", f"{what} must not contain NUL characters")
    size = len(content.encode())
    if size > max_bytes:
        raise invalid(
            f"{what.upper()}_TOO_LARGE", f"{what} is {size} bytes, the limit is {max_bytes}", limit=str(max_bytes)
        )
    return content


def check_confidence(value: float) -> float:
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise invalid("INVALID_CONFIDENCE", "confidence must be a number between 0 and 1")
    return value


def clamp_page_size(requested: int, default: int = 50, maximum: int = 500) -> int:
    if requested < 0:
        raise invalid("INVALID_PAGE_SIZE", "page_size must not be negative")
    return min(requested or default, maximum)
