"""The store's reads of one search, and the sessions they run in: the lexical channels' statement,
the vector channels' statement and the answer's whole rows. Search says when each may start (a
session opened ahead, while its query is embedded); which session a statement runs in, and when a
session ends, stays here, so the transaction boundary lives in the store layer alone."""
from __future__ import annotations

import uuid
from collections.abc import Sequence

from ....core.access.caller import Caller
from ....core.model import MemoryFilter, MemoryRecord, Scored
from ..memories import MemoryStore
from ..session import SessionAhead
from .lexical import LexicalQuery
from .nearest import VectorQuery, broad
from .whole_rows import WholeRows


class SearchReads:
    """The reads of one search under a filter, over the memories' store. Opened sessions are used once by the statement they were opened for (the lexical one is
    then left open for the answer's whole rows); every other statement runs in a session of its
    own. `close` ends whatever was opened, used or not."""

    def __init__(self, store: MemoryStore, caller: Caller, f: MemoryFilter) -> None:
        self.store, self.caller, self.filter = store, caller, f
        self._vector_session: SessionAhead | None = None
        self._vector_unused: SessionAhead | None = None
        self._lexical_unused: SessionAhead | None = None
        self._rows: WholeRows | None = None

    def tenant_walked_whole(self) -> bool:
        """Whether the vector channels walk the whole of a tenant known to be big (no round trip:
        the size read last), where the lexical channels match thousands of rows too."""
        return broad(self.filter) and self.store.walks.known_big(self.caller.tenant_id)

    def open_vector_session(self) -> None:
        """The vector channels' session, opened now."""
        self._vector_session = self._vector_unused = self.store.vector_session_ahead(self.caller, self.filter)

    def open_lexical_session(self) -> None:
        """The lexical channels' session, opened now and left open after them for the answer's rows."""
        self._lexical_unused = self.store.lexical_session_ahead(self.caller)
        self._rows = self.store.whole_rows(self.caller, self._lexical_unused)

    def open_rows_session(self) -> None:
        """A session for the answer's rows, when the lexical channels left none."""
        if self._rows is None:
            self._rows = self.store.whole_rows(self.caller)

    @property
    def rows_session_open(self) -> bool:
        return self._rows is not None

    async def vector_searches(self, queries: Sequence[VectorQuery]) -> list[list[Scored]]:
        ahead, self._vector_unused = self._vector_unused, None
        return await self.store.vector_searches(self.caller, queries, candidates=True, ahead=ahead)

    async def lexical_searches(self, queries: Sequence[LexicalQuery], *, in_shared: bool = True) -> list[list[Scored]]:
        """In the session opened for them when `in_shared` (and it is unused), else in one of their own."""
        ahead = None
        if in_shared:
            ahead, self._lexical_unused = self._lexical_unused, None
        return await self.store.lexical_searches(self.caller, queries, candidates=True, ahead=ahead)

    async def whole(self, memory_ids: Sequence[uuid.UUID], *, last: bool = False) -> list[MemoryRecord]:
        """The visible memories among the ids, whole: in the rows' session (left open unless last),
        or in a session of their own."""
        if self._rows is not None:
            return await self._rows.read(memory_ids, last=last)
        return await self.store.get_many(self.caller, memory_ids)

    async def close(self) -> None:
        if self._rows is not None:
            self._rows.close_soon()
        if self._vector_session is not None:
            await self._vector_session.close()
