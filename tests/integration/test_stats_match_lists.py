"""GetStats counts exactly what the same caller can list: its total, and each count by scope,
layer, kind and status, is the number of memories ListMemories pages through for that caller with
the same filter, whatever else the tenant holds (other agents' private memories, domain memories of
other tenants, memories pending, superseded, deleted, stale, disputed or archived, working memory)."""
from __future__ import annotations

import uuid

import pytest

from memplane import AsyncMemoryClient, MemoryInput
from tests.support.inproc import serving

pytestmark = pytest.mark.asyncio(loop_scope="session")

STATUSES = ("active", "pending", "superseded", "deleted", "stale", "needs_confirmation", "archived")
# filter keyword -> (its values, the Stats map counting them, the map's key prefix)
COUNTED = {
    "scopes": (("global", "domain", "private"), "by_scope", "SCOPE_"),
    "layers": (("working", "episodic", "semantic", "procedural"), "by_layer", "LAYER_"),
    "kinds": (("turn", "event", "fact", "preference", "procedure", "lesson", "summary"), "by_kind", "KIND_"),
    "statuses": (STATUSES, "by_status", "MEMORY_STATUS_"),
}


async def listed(client, **filters) -> list:
    """Every memory ListMemories gives the client under the filter, every status unless it names some."""
    filters.setdefault("statuses", STATUSES)
    page_token, memories = "", []
    while True:
        page = await client.list_memories(page_size=7, page_token=page_token, **filters)
        memories += page.items
        if not (page_token := page.next_page_token):
            return memories


def city(value: str, **fields) -> MemoryInput:
    return MemoryInput(f"The office is in {value}", kind="fact", entity="office", attribute="city", value=value,
                       **fields)


async def populate(served, runtime, keys: dict[str, str], other_keys: dict[str, str], domain: str) -> None:
    def client(secret: str, agent: str | None = None) -> AsyncMemoryClient:
        return AsyncMemoryClient(served.address, secret, agent_id=agent)

    async with client(keys["a1"]) as a1, client(keys["a2"]) as a2, client(keys["writer"]) as writer, \
            client(keys["writer"], "a1") as writer_a1, client(keys["writer"], "a2") as writer_a2, \
            client(other_keys["writer"]) as other, client(other_keys["a1"]) as other_a1:
        await a1.write([MemoryInput("a1 prefers tea", kind="preference"), MemoryInput("a1 learnt to retry", kind="lesson"),
                        MemoryInput("a1 guesses the budget", kind="fact", confidence=0.2),
                        MemoryInput("hello, I need a refund", kind="turn", session_id="s1", user_id="u1"),
                        MemoryInput("the refund was sent", kind="event", session_id="s1", user_id="u1"),
                        MemoryInput("u1's order is number 42", kind="fact", session_id="s1", user_id="u1")])
        await a1.write([MemoryInput("a1 checks the ledger", kind="turn", layer="working", session_id="s1")])
        await a1.close_session("s1")
        await a1.reflect(session_id="s1", user_id="u1")
        [source] = await listed(a1, kinds="fact", session_id="s1")
        await a1.update_memory(source.id, content="u1's order is number 43")  # its summaries go stale
        await a2.write([MemoryInput("a2 keeps a secret plan", kind="fact"), city("Rome", scope="private"),
                        MemoryInput("a2 greets the customer", kind="turn", session_id="s2")])
        await a2.write([MemoryInput("a2 is drafting a reply", kind="turn", layer="working", session_id="s2")])
        gone = await a2.write([MemoryInput("a2 forgets this", kind="fact")])
        await a2.forget(ids=[gone.memories[0].id])
        await writer_a1.write([city("Berlin", scope="global")])
        await writer_a2.write([city("Munich", scope="global")])  # another agent disagrees: needs confirmation
        await writer.write([MemoryInput("the launch is on friday", kind="fact", entity="launch", attribute="day",
                                        value="friday"), MemoryInput("deploy with a canary", kind="procedure")])
        await writer.write([MemoryInput("the launch is on monday", kind="fact", entity="launch", attribute="day",
                                        value="monday")])  # supersedes friday
        archived = await writer.write([MemoryInput("the sprint review happened", kind="event")])
        await writer.write([MemoryInput("refunds settle in two days", kind="fact", scope="domain", domain=domain)])
        await other.write([MemoryInput("refunds need a receipt", kind="fact", scope="domain", domain=domain),
                           MemoryInput("the other tenant's office", kind="fact")])
        await other_a1.write([MemoryInput("the other tenant's a1 prefers coffee", kind="preference")])
    # Archived by hand: the lifecycle policy that archives a finished task's episodes is background work.
    await runtime.pool.execute("UPDATE memories SET status = 'archived' WHERE id = $1",
                               uuid.UUID(archived.memories[0].id))


async def test_stats_count_what_each_caller_lists(deps, runtime):
    async with serving(deps, runtime) as served:
        domain = f"d-{uuid.uuid4().hex[:8]}"
        _, keys = await served.tenant(domains={domain: True})
        _, other_keys = await served.tenant(domains={domain: True})
        await populate(served, runtime, keys, other_keys, domain)
        callers = {"agent key a1": (keys["a1"], None), "agent key a2": (keys["a2"], None),
                   "tenant key": (keys["writer"], None), "reader key": (keys["reader"], None),
                   "tenant key acting as a2": (keys["writer"], "a2")}
        seen: set[str] = set()
        for name, (secret, agent) in callers.items():
            async with AsyncMemoryClient(served.address, secret, agent_id=agent) as client:
                stats, memories = await client.get_stats(), await listed(client)
                assert stats.total == len(memories), name
                for field, (values, counts, prefix) in COUNTED.items():
                    for value in values:
                        shown = len(await listed(client, **{field: value}))
                        assert getattr(stats, counts).get(prefix + value.upper(), 0) == shown, (name, value)
                        assert (await client.get_stats(**{field: value})).total == shown, (name, value)
                seen |= {m.status.name.lower() for m in memories} | {m.kind.name.lower() for m in memories}
        # Every status and kind was there to be counted by some caller.
        assert seen == {*STATUSES, *COUNTED["kinds"][0]}
