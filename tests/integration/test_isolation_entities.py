"""Property: the entity index (migration 0017) and the graph channel never cross a visibility
boundary (DESIGN §1): no link to, no count of, and no entity taken from a memory of another
tenant, another agent's private memory or a domain the caller is not granted.

One world (two tenants of two agents each; a domain both may read, written by the first; a domain
only the first may read) where memories of every scope share the same few rare entities, one of
them held only by the first tenant's private memories of agent a1. Hypothesis then draws a
caller of either tenant and any role, seeds taken from *any* memory of the world (as if a first
pass had returned another tenant's ids) and query entities, and checks the store's links
(`EntityStore.links`, the SQL function under row-level security) and a whole Search with the
graph channel against `Caller.can_read`:

  1. every linked memory, seed entity and search hit is one the caller may read;
  2. each entity's count is exactly the number of readable active rows holding it (a count over
     rows the caller cannot read would tell it they exist);
  3. an entity held only by memories the caller cannot read links nothing, even when the seeds
     name those memories; `entities_of` a memory it cannot read is None;
  4. the rarity base (`Links.tenant_rows`) counts the rows the caller reads, not the tenant's.

To see it fail, drop the agent condition from the private branch of `mp_entity_links` (migration
0017) or read the seeds' entities without the policy's predicate.
"""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, replace

import pytest_asyncio
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, MemoryRecord, Scope
from memplane_server.core.write.entities import extract_entities
from memplane_server.services.admin import AdminService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService
from tests.integration.conftest import PLATFORM

ENTITIES = ["Zanzibar", "Quentin Blake", "Orinoco", "Tarragona"]
SECRET = "Vellamo Harbour"  # only in the first tenant's private memories of agent a1
MAX_ROWS = 100


@dataclass
class World:
    callers: list[Caller]
    memories: list[MemoryRecord]


def draft(content: str, scope: Scope, domain: str | None = None, session: str = "s1") -> MemoryDraft:
    return MemoryDraft(scope=scope, domain=domain, agent_id=None, layer=None, kind=Kind.EVENT, content=content,
                       session_id=session)


async def build(deps) -> World:
    admin, write = AdminService(deps.tenancy), WriteService(deps).write
    run = uuid.uuid4().hex[:8]
    shared, first_only = f"shared-{run}", f"first-{run}"
    for name in (shared, first_only):
        await admin.create_domain(PLATFORM, name, "")
    callers, memories = [], []
    for n, grants in enumerate(({shared: True, first_only: True}, {shared: False})):
        tenant = f"ent-{run}-{n}"
        await admin.create_tenant(PLATFORM, tenant, tenant, 0, False)
        for agent in ("a1", "a2"):
            await admin.create_agent(PLATFORM, tenant, agent, agent)
        for domain, can_write in grants.items():
            await admin.grant_domain(PLATFORM, domain, tenant, can_write)

        def caller(role: Role, agent: str | None, tenant: str = tenant, grants: dict = grants) -> Caller:
            return Caller(key_id=f"{tenant}-{role.value}-{agent}", role=role, tenant_id=tenant, agent_id=agent,
                          domains=dict(grants))

        writer, reader, a1, a2 = (caller(Role.WRITER, None), caller(Role.READER, None),
                                  caller(Role.AGENT, "a1"), caller(Role.AGENT, "a2"))
        callers += [writer, reader, a1, a2]
        # Noise, so the shared entities are rare in every tenant.
        memories += await write(writer, [draft(f"note {i} about the weather", Scope.GLOBAL) for i in range(6)])
        for i, name in enumerate(ENTITIES):
            other = ENTITIES[(i + 1) % len(ENTITIES)]
            memories += await write(writer, [draft(f"We met {name} near {other} in tenant {n}", Scope.GLOBAL)])
            memories += await write(a1, [draft(f"Agent one saw {name} and {SECRET if n == 0 else other}", Scope.PRIVATE)])
            memories += await write(a2, [draft(f"Agent two saw {name} by {other}", Scope.PRIVATE, session="s2")])
            if n == 0:
                memories += await write(writer, [draft(f"Shared notes on {name}", Scope.DOMAIN, shared)])
                memories += await write(writer, [draft(f"Restricted notes on {name} and {other}", Scope.DOMAIN, first_only)])
    return World(callers, memories)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(deps) -> World:
    return await build(deps)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def session_loop(runtime):
    return asyncio.get_running_loop()


def holders(world: World, caller: Caller, entity: str) -> set[uuid.UUID]:
    return {m.id for m in world.memories if caller.can_read(m) and entity in extract_entities(m.content)}


async def check(deps, world: World, caller: Caller, seeds: list[uuid.UUID], asked: list[str]) -> None:
    keys = [k for name in asked for k in extract_entities(f"about {name}")]
    links = await deps.entities.links(caller, MemoryFilter(), seeds, keys, max_rows=MAX_ROWS, as_of=None)
    readable = {m.id for m in world.memories if caller.can_read(m)}
    linked = {link.record.id for link in links.linked}
    assert linked <= readable, f"{caller.key_id} linked to {linked - readable}"
    assert set(links.seed_entities) <= readable
    for link in links.linked:
        for entity, count in link.entities.items():
            assert count == len(holders(world, caller, entity)), f"{entity!r} counted beyond {caller.key_id}'s rows"
    secret = extract_entities(f"about {SECRET}")[0]
    assert not any(secret in link.entities for link in links.linked if link.record.id not in holders(world, caller, secret))
    with_graph = replace(deps, settings=deps.settings.model_copy(update={"graph_weight": 1.0}))  # off by default
    hits = await SearchService(with_graph).search(caller, SearchQuery(" ".join(asked) or "notes", explain=True))
    assert {h.memory.id for h in hits} <= readable


def test_entity_links_never_cross_tenant_agent_or_domain(deps, world, session_loop):
    ids = [m.id for m in world.memories]

    @hsettings(max_examples=60, deadline=None, derandomize=True, database=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(caller=st.sampled_from(world.callers), seeds=st.lists(st.sampled_from(ids), max_size=10),
           asked=st.lists(st.sampled_from(ENTITIES + [SECRET]), max_size=3, unique=True))
    def property_holds(caller: Caller, seeds: list[uuid.UUID], asked: list[str]) -> None:
        session_loop.run_until_complete(check(deps, world, caller, seeds, asked))

    property_holds()


async def test_the_rarity_base_counts_only_the_rows_the_caller_reads(deps, world):
    """Search's explanation shows it ("n of total rows"): the tenant's whole count told an agent how
    many memories it cannot read (migration 0026)."""
    for caller in world.callers:
        links = await deps.entities.links(caller, MemoryFilter(), [], ["zanzibar"], max_rows=MAX_ROWS, as_of=None)
        assert links.tenant_rows == sum(caller.can_read(m) for m in world.memories), caller.key_id


async def test_entities_of_an_unreadable_memory_is_none(deps, world):
    for caller in world.callers:
        for m in world.memories:
            got = await deps.entities.entities_of(caller, m.id)
            assert (got is not None) == caller.can_read(m)
