"""Memories read whole by id: alone (MemoryStore.get_many) or as a search's answer, in steps in one
session (WholeRows)."""
from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from ....core.access.caller import Caller
from ....core.model import MemoryRecord
from ..session import SessionAhead
from ..sql import MEMORY_COLUMNS, Params, record_from_row, visibility


async def visible_among(conn: asyncpg.Connection, caller: Caller, memory_ids: Sequence[uuid.UUID]) -> list[MemoryRecord]:
    """The memories among the ids the caller may read, whole, in no particular order."""
    p = Params(list(memory_ids))
    where = ["m.id = ANY($1::uuid[])", visibility(caller, p)]
    rows = await conn.fetch(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {' AND '.join(where)}", *p.values)
    return [record_from_row(r) for r in rows]


class WholeRows:
    """The whole rows of a search's answer, read in one session: the leading hits of the channels
    that read none whole during fusion, the rest it answered after it. After it in a session of its
    own, that read was four round trips (BEGIN, the caller's settings, the rows, COMMIT) in 102 of
    231 LoCoMo searches (bench/README.md); in the lexical channels' session, left open for it, it is
    the rows alone, and a search that reads none opens nothing for them."""

    def __init__(self, session: SessionAhead, caller: Caller) -> None:
        self.session, self.caller = session, caller

    async def read(self, memory_ids: Sequence[uuid.UUID], *, last: bool = False) -> list[MemoryRecord]:
        """The visible memories among the ids; the session stays open unless last."""
        return await self.session.run(lambda conn: visible_among(conn, self.caller, memory_ids), last=last)

    def close_soon(self) -> None:
        """Ends the session without waiting: committed after a read, given back when none came."""
        self.session.close_soon()

