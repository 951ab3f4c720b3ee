"""Resolving the memory ids a request names into memories the caller may change."""
from __future__ import annotations

import uuid

from ..core.access.caller import Caller
from ..core.errors import denied, not_found
from ..core.model import MemoryRecord
from ..stores.postgres.memories import MemoryStore


def parse_memory_id(value: str) -> uuid.UUID:
    """A malformed id is as unknown as another tenant's id: NOT_FOUND, not a hint."""
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise not_found("memory") from None


async def changeable(store: MemoryStore, caller: Caller, memory_ids: list[str]) -> list[MemoryRecord]:
    """The memories the ids name, in order, when the caller may change every one of them.

    Checked before anything changes, in the order given: the first id the caller cannot read is
    NOT_FOUND (like an id that exists nowhere), the first it can read but not change is read-only.
    """
    well_formed = []
    for raw in memory_ids:
        try:
            well_formed.append(uuid.UUID(raw))
        except (ValueError, AttributeError, TypeError):
            pass  # reported in its turn below, after the ids before it
    found = {r.id: r for r in await store.get_many(caller, well_formed)}
    out = []
    for raw in memory_ids:
        record = found.get(parse_memory_id(raw))
        if record is None:
            raise not_found("memory")
        if not caller.can_write(record):
            raise denied("MEMORY_READ_ONLY", "this caller may read but not change that memory")
        out.append(record)
    return out
