"""Watching the change feed: one task streams changes while another writes; stop after N events.

Shows AsyncMemoryClient.watch(), an async iterator of every change this key may see (created,
superseded, updated, forgotten, erased), in commit order, with a position to resume from
(watch(after_position=...)). With progress=True the stream's first item is a WatchProgress
saying it is open, so the writer starts only once nothing can be missed. The writer records an
order's status twice (the second supersedes the first), then writes, edits and forgets a note.

Run it against `make serve` with the tenant admin key printed at its first start:

    MEMPLANE_API_KEY=mpk_... .venv/bin/python examples/watch_changes.py

MEMPLANE_ADDRESS (default 127.0.0.1:50051) picks another server, MEMPLANE_AGENT_ID an agent for
a key not bound to one, WATCH_EVENTS how many events to wait for (default 6).
"""
import asyncio
import os
import sys
import uuid
from contextlib import aclosing

from memplane import AsyncMemoryClient, ChangeEvent, MemplaneError

ADDRESS = os.environ.get("MEMPLANE_ADDRESS", "127.0.0.1:50051")
API_KEY = os.environ.get("MEMPLANE_API_KEY") or sys.exit(
    "set MEMPLANE_API_KEY to a key of your tenant (make serve prints a tenant admin key at first start)")
EVENTS = int(os.environ.get("WATCH_EVENTS", "6"))


async def watch(memory: AsyncMemoryClient, session: str, opened: asyncio.Event) -> None:
    seen = 0
    # Only this run's session, so other writers of the tenant do not count; aclosing ends the stream
    # as soon as the loop is left, not whenever the generator happens to be collected.
    async with aclosing(memory.watch(session_id=session, progress=True, timeout=60)) as changes:
        async for item in changes:
            if not isinstance(item, ChangeEvent):
                opened.set()  # progress: the stream is open (and, later, still alive while nothing changes)
                continue
            seen += 1
            print(f"event {seen}: #{item.position} {item.change_kind.name.lower():<10} {item.memory_id}"
                  f"  {item.memory.content if item.memory else ''}")
            if seen == EVENTS:
                return


async def write(memory: AsyncMemoryClient, session: str, opened: asyncio.Event) -> None:
    await opened.wait()
    order = f"order-{uuid.uuid4().hex[:4]}"
    for status in ("packed", "shipped"):  # a new value of the same entity and attribute supersedes the old
        await memory.write_one(f"{order} is {status}", kind="fact", session_id=session,
                               entity=order, attribute="status", value=status)
    note = await memory.write_one(f"Call the customer of {order} on Monday", kind="event", session_id=session)
    await memory.update_memory(note.id, content=f"Call the customer of {order} on Tuesday")
    await memory.forget(ids=[note.id], reason="called")
    print("writer: done")


async def main() -> None:
    session, opened = f"watch-{uuid.uuid4().hex[:8]}", asyncio.Event()
    async with AsyncMemoryClient(ADDRESS, API_KEY, agent_id=os.environ.get("MEMPLANE_AGENT_ID")) as memory:
        await asyncio.gather(watch(memory, session, opened), write(memory, session, opened))


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except MemplaneError as error:  # the server's code and stable reason; a watch past its timeout ends so too
        sys.exit(f"memplane call failed: {error}")
