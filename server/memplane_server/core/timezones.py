"""Caller time zones: times are stored in UTC and only rendered in the caller's zone."""
from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import invalid


def parse_time_zone(name: str | None) -> ZoneInfo | None:
    """An IANA zone name such as "Asia/Shanghai"; empty means UTC rendering."""
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise invalid("INVALID_TIME_ZONE", f"{name!r} is not an IANA time zone name", field="time_zone") from None


def render(moment: datetime, zone: ZoneInfo | None) -> str:
    local = moment.astimezone(zone or timezone.utc)
    return local.strftime("%Y-%m-%d %H:%M %Z")
