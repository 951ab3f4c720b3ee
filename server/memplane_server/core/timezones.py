"""Caller time zones: times are stored in UTC and only rendered in the caller's zone."""
from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import invalid
from .validation import MAX_TIME_ZONE_BYTES


def parse_time_zone(name: str | None) -> ZoneInfo | None:
    """An IANA zone name such as "Asia/Shanghai"; empty means UTC rendering."""
    if not name:
        return None
    if len(name.encode()) > MAX_TIME_ZONE_BYTES:
        raise invalid("INVALID_TIME_ZONE", "time_zone is too long for an IANA time zone name", field="time_zone")
    try:
        return ZoneInfo(name)
    # OSError: a name the file system refuses as a path (NUL, a component too long).
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise invalid("INVALID_TIME_ZONE", f"{name!r} is not an IANA time zone name", field="time_zone") from None


def render(moment: datetime, zone: ZoneInfo | None) -> str:
    local = moment.astimezone(zone or timezone.utc)
    return local.strftime("%Y-%m-%d %H:%M %Z")
