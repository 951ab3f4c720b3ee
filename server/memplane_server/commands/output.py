"""What admin commands print: SDK results made JSON-ready."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from datetime import date


def jsonable(value, *, enum_name: Callable[[str], str] = str):
    """Times and days as ISO 8601 and SDK enums by name (enum_name shapes it), through SDK results
    (dataclasses), dicts and lists."""
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable(asdict(value), enum_name=enum_name)
    if isinstance(value, date):  # a datetime too
        return value.isoformat()
    if isinstance(value, dict):
        return {k: jsonable(v, enum_name=enum_name) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, enum_name=enum_name) for v in value]
    if hasattr(value, "name") and hasattr(value, "value"):  # an SDK enum
        return enum_name(value.name)
    return value
