"""SearchReads: a session opened ahead serves the first statement it was opened for, and only that
one; the lexical session is left open for the answer's whole rows; close ends what was opened."""
from __future__ import annotations

import asyncio

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import MemoryFilter
from memplane_server.stores.postgres.search.reads import SearchReads

CALLER = Caller(key_id="k", role=Role.WRITER, tenant_id="t", agent_id=None, domains={})


class Session:
    def __init__(self, name: str) -> None:
        self.name, self.closed = name, False

    async def close(self) -> None:
        self.closed = True


class Rows:
    def __init__(self, session: Session | None) -> None:
        self.session, self.reads, self.closed = session, [], False

    async def read(self, ids, *, last=False):
        self.reads.append((list(ids), last))
        return []

    def close_soon(self) -> None:
        self.closed = True


class Store:
    """Records the session each statement was given (None: one of its own)."""

    def __init__(self) -> None:
        self.given: list[tuple[str, str | None]] = []
        self.rows: list[Rows] = []
        self.got_many = 0

    def vector_session_ahead(self, caller, f):
        return Session("vector")

    def lexical_session_ahead(self, caller):
        return Session("lexical")

    def whole_rows(self, caller, session=None):
        self.rows.append(Rows(session))
        return self.rows[-1]

    async def vector_searches(self, caller, queries, *, candidates, ahead):
        self.given.append(("vector", ahead.name if ahead else None))
        return []

    async def lexical_searches(self, caller, queries, *, candidates, ahead):
        self.given.append(("lexical", ahead.name if ahead else None))
        return []

    async def get_many(self, caller, ids):
        self.got_many += 1
        return []


def reads_of(store: Store) -> SearchReads:
    return SearchReads(store, CALLER, MemoryFilter())  # type: ignore[arg-type]


def test_the_vector_session_opened_ahead_serves_the_first_statement_only_and_is_closed():
    store = Store()
    reads = reads_of(store)
    reads.open_vector_session()
    session = reads._vector_session

    async def run():
        await reads.vector_searches([])
        await reads.vector_searches([])
        await reads.close()

    asyncio.run(run())
    assert store.given == [("vector", "vector"), ("vector", None)] and session.closed


def test_the_lexical_session_serves_the_shared_statement_and_then_the_answers_rows():
    store = Store()
    reads = reads_of(store)
    reads.open_lexical_session()

    async def run():
        await reads.lexical_searches([], in_shared=False)
        await reads.lexical_searches([])
        await reads.whole(["id"], last=True)
        await reads.close()

    asyncio.run(run())
    [rows] = store.rows
    assert store.given == [("lexical", None), ("lexical", "lexical")]
    assert rows.session.name == "lexical" and rows.reads == [(["id"], True)] and rows.closed


def test_without_a_rows_session_the_answers_rows_are_read_in_a_session_of_their_own():
    store = Store()
    reads = reads_of(store)
    asyncio.run(reads.whole(["id"]))
    assert store.got_many == 1 and not reads.rows_session_open


def test_a_rows_session_is_opened_only_when_the_lexical_channels_left_none():
    store = Store()
    reads = reads_of(store)
    reads.open_lexical_session()
    reads.open_rows_session()
    assert len(store.rows) == 1
