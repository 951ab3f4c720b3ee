"""Input rules shared by every use case, and the limits behind them.

A stored value must always read back (DESIGN §6), so every value is checked against the
narrowest layer it passes through (protobuf, Python, PostgreSQL, Redis) before anything is
stored: PostgreSQL text and jsonb refuse NUL characters, jsonb refuses NaN and infinities,
and a value without a bound would let one caller fill the store or the logs. Error messages
never repeat a caller's value at length.
"""
from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from typing import Any

from .errors import invalid
from .model import MemoryFilter

_IDENT = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")

# Caller-chosen ids (user_id, session_id, entity, attribute, tags, sources, state keys).
MAX_FREE_ID_BYTES = 256
MAX_REQUEST_ID_BYTES = 128
MAX_TAGS = 64
# Entries of each repeated filter field (scopes, layers, kinds, statuses, domains, tags).
MAX_FILTER_VALUES = 64
# Metadata as compact JSON, and how deeply its objects and lists may nest.
MAX_METADATA_BYTES = 64 * 1024
MAX_METADATA_DEPTH = 16
# Display names of tenants, agents and keys; descriptions, forget reasons and feedback comments.
MAX_NAME_BYTES = 256
MAX_NOTE_BYTES = 4096
# The longest IANA zone name is about 30 characters.
MAX_TIME_ZONE_BYTES = 64
MAX_WORKING_TTL_SECONDS = 366 * 24 * 3600
MAX_TASK_STEPS = 1000
MAX_PAGE_TOKEN_BYTES = 1024

# Times every layer can hold and give back unchanged. Protobuf and Python both span the years
# 1-9999, and PostgreSQL far more, but asyncpg writes 0001-01-01T00:00:00Z and
# 9999-12-31T23:59:59.999999Z as -infinity/infinity and reads those back as naive
# datetime.min/max, which protobuf then cannot take; and a time within a day of either end
# leaves the calendar when rendered in a caller's zone (UTC-12 .. UTC+14). One day's margin
# at each end avoids both.
EARLIEST_TIME = datetime(1, 1, 2, tzinfo=timezone.utc)
LATEST_TIME = datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=timezone.utc)


def shown(value: str, limit: int = 64) -> str:
    """A caller's value as an error message may quote it: cut, so an error never echoes a megabyte."""
    return repr(value if len(value) <= limit else value[:limit] + "...")


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
    if len(value.encode()) > MAX_FREE_ID_BYTES or "\x00" in value:
        raise invalid(f"INVALID_{what.upper()}", f"{what} must be at most {MAX_FREE_ID_BYTES} bytes without NUL")
    return value


def check_text(value: str, what: str, max_bytes: int) -> str:
    """Free text that may be empty (names, descriptions, reasons, values): bounded, without NUL."""
    if "\x00" in value:
        raise invalid(f"INVALID_{what.upper()}", f"{what} must not contain NUL characters")
    size = len(value.encode())
    if size > max_bytes:
        raise invalid(
            f"{what.upper()}_TOO_LARGE", f"{what} is {size} bytes, the limit is {max_bytes}", limit=str(max_bytes)
        )
    return value


def check_content(content: str, max_bytes: int, what: str = "content") -> str:
    if not content or not content.strip():
        raise invalid(f"{what.upper()}_REQUIRED", f"{what} must not be empty")
    return check_text(content, what, max_bytes)


def check_tags(tags) -> None:
    if len(tags) > MAX_TAGS:
        raise invalid("TOO_MANY_TAGS", f"at most {MAX_TAGS} tags", limit=str(MAX_TAGS))
    for tag in tags:
        check_free_id(tag, "tag")


def check_confidence(value: float) -> float:
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise invalid("INVALID_CONFIDENCE", "confidence must be a number between 0 and 1")
    return value


def check_time(value: datetime | None, what: str) -> datetime | None:
    if value is not None and not EARLIEST_TIME <= value <= LATEST_TIME:
        raise invalid(
            "INVALID_TIMESTAMP", f"{what} must be between 0001-01-02 and 9999-12-30 (UTC)", field=what
        )
    return value


def check_ttl(seconds: int) -> int:
    if not 0 < seconds <= MAX_WORKING_TTL_SECONDS:
        raise invalid(
            "INVALID_TTL", f"ttl must be between 1 and {MAX_WORKING_TTL_SECONDS} seconds (366 days)",
            field="ttl",
        )
    return seconds


def check_metadata(data: dict[str, Any], what: str = "metadata") -> dict[str, Any]:
    """JSON that jsonb stores and protobuf's Struct reads back: finite numbers, no NUL, bounded."""
    _check_json(data, what, 1)
    size = len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_METADATA_BYTES:
        raise invalid(
            f"{what.upper()}_TOO_LARGE", f"{what} is {size} bytes as JSON, the limit is {MAX_METADATA_BYTES}",
            limit=str(MAX_METADATA_BYTES), field=what,
        )
    return data


def _check_json(value: Any, what: str, depth: int) -> None:
    if isinstance(value, (dict, list)):
        if depth > MAX_METADATA_DEPTH:
            raise invalid(f"INVALID_{what.upper()}", f"{what} nests deeper than {MAX_METADATA_DEPTH} levels", field=what)
        for key in value if isinstance(value, dict) else ():
            _check_json(key, what, depth)
        for item in value.values() if isinstance(value, dict) else value:
            _check_json(item, what, depth + 1)
    elif isinstance(value, str):
        if "\x00" in value:
            raise invalid(f"INVALID_{what.upper()}", f"{what} must not contain NUL characters", field=what)
    elif isinstance(value, float) and not math.isfinite(value):
        raise invalid(f"INVALID_{what.upper()}", f"{what} numbers must be finite (no NaN or infinity)", field=what)


def check_filter(f: MemoryFilter) -> MemoryFilter:
    """Every condition of a filter, so a query never carries a value PostgreSQL refuses."""
    for name in ("scopes", "layers", "kinds", "statuses", "domains", "tags"):
        if len(getattr(f, name)) > MAX_FILTER_VALUES:
            raise invalid("TOO_MANY_FILTER_VALUES", f"filter.{name} has more than {MAX_FILTER_VALUES} entries",
                          field=f"filter.{name}")
    for domain in f.domains:
        check_identifier(domain, "domain")
    if f.agent_id is not None:
        check_identifier(f.agent_id, "agent")
    for name in ("user_id", "session_id", "entity", "attribute"):
        check_free_id(getattr(f, name), name)
    for tag in f.tags:
        check_free_id(tag, "tag")
    check_time(f.occurred_after, "filter.occurred.start_time")
    check_time(f.occurred_before, "filter.occurred.end_time")
    return f


def clamp_page_size(requested: int, default: int = 50, maximum: int = 500) -> int:
    if requested < 0:
        raise invalid("INVALID_PAGE_SIZE", "page_size must not be negative")
    return min(requested or default, maximum)
