"""SessionBatch: channels started in the same turn of the event loop share one store call; a channel
started alone is a call of its own; a failure reaches every channel of the call."""
from __future__ import annotations

import asyncio

import numpy as np

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import MemoryFilter
from memplane_server.services.search.channels import SessionBatch
from memplane_server.stores.postgres.search.nearest import VectorQuery

CALLER = Caller(key_id="k", role=Role.WRITER, tenant_id="t", agent_id=None, domains={})


class Store:
    """Answers each query with its limit, and records the calls."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[int] = []
        self.fail = fail

    async def vector_searches(self, caller, queries):
        self.calls.append(len(queries))
        if self.fail:
            raise RuntimeError("down")
        return [[q.limit] for q in queries]


def query(limit: int) -> VectorQuery:
    return VectorQuery(MemoryFilter(), np.zeros(3, dtype=np.float32), limit)


def test_channels_started_together_share_one_call_and_get_their_own_answers():
    store = Store()

    async def run():
        batch = SessionBatch("vector SQL", lambda queries: store.vector_searches(CALLER, queries))
        together = await asyncio.gather(*(asyncio.ensure_future(batch.search(query(n))) for n in (1, 2, 3)))
        alone = await batch.search(query(4))
        return together, alone

    together, alone = asyncio.run(run())
    assert together == [[1], [2], [3]] and alone == [4]
    assert store.calls == [3, 1]


def test_a_failed_call_fails_every_channel_in_it():
    async def run():
        batch = SessionBatch("vector SQL", lambda queries: Store(fail=True).vector_searches(CALLER, queries))
        return await asyncio.gather(batch.search(query(1)), batch.search(query(2)), return_exceptions=True)

    assert [str(e) for e in asyncio.run(run())] == ["down", "down"]


def test_a_cancelled_channel_leaves_the_others_their_answers():
    async def run():
        batch = SessionBatch("vector SQL", lambda queries: Store().vector_searches(CALLER, queries))
        first, second = asyncio.ensure_future(batch.search(query(1))), asyncio.ensure_future(batch.search(query(2)))
        await asyncio.sleep(0)
        first.cancel()
        return await second, first

    answer, first = asyncio.run(run())
    assert answer == [2] and first.cancelled()
