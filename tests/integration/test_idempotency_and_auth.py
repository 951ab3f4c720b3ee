"""Idempotency records in real Redis, API-key resolution and migrations in real PostgreSQL."""
from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg
import pytest

from memplane import AsyncMemoryClient, MemoryInput
from memplane.v1 import admin_service_pb2, memory_service_pb2
from memplane_server.api.interceptors import IDEMPOTENT_METHODS
from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.access.requests import RequestKey, request_key
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.services.access.auth import Authenticator
from memplane_server.services.admin import AdminService
from memplane_server.stores.postgres.migrations import migrate
from memplane_server.stores.postgres.pool import create_pool
from memplane_server.stores.postgres.session import caller_session
from memplane_server.stores.redis.idempotency import (
    LEASE_SECONDS,
    RENEW_EVERY_SECONDS,
    Claim,
    IdempotencyConflict,
    IdempotencyStore,
)
from tests.integration.conftest import PLATFORM
from tests.support.inproc import serving

pytestmark = pytest.mark.asyncio(loop_scope="session")


def key(owner: str, method: str, request_id: str, body: bytes) -> RequestKey:
    tenant, key_id, agent = owner.split("/")
    return request_key(Caller(key_id, Role.WRITER, tenant, agent), method, request_id, body)


async def test_concurrent_calls_with_one_request_id_run_once(runtime):
    store = IdempotencyStore(runtime.redis_client, 60)
    runs = 0

    async def call(n: int) -> bytes:
        nonlocal runs
        claim = await store.begin(key("t1/k/a", "Write", "req-1", b"same request"))
        if isinstance(claim, bytes):
            return claim
        runs += 1
        await asyncio.sleep(0.05)
        await store.complete(claim, b"response-of-first")
        return b"response-of-first"

    results = await asyncio.gather(*(call(n) for n in range(50)))
    assert runs == 1 and set(results) == {b"response-of-first"}


async def test_request_id_reused_with_another_request_conflicts(runtime):
    store = IdempotencyStore(runtime.redis_client, 60)
    await store.complete(await store.begin(key("t1/k/a", "Forget", "req-2", b"a")), b"done")
    with pytest.raises(IdempotencyConflict):
        await store.begin(key("t1/k/a", "Forget", "req-2", b"b"))


@pytest.mark.parametrize("other", ["t2/k/a", "t1/k2/a", "t1/k/a2"])
async def test_request_ids_are_per_caller(runtime, other):
    store = IdempotencyStore(runtime.redis_client, 60)
    request_id = f"req-{uuid.uuid4()}"
    await store.complete(await store.begin(key("t1/k/a", "Write", request_id, b"x")), b"first caller's response")
    assert isinstance(await store.begin(key(other, "Write", request_id, b"x")), Claim)
    assert isinstance(await store.begin(key(other, "Write", f"{request_id}-b", b"y")), Claim)


@pytest.mark.parametrize("other", ["t1/k2/a", "t1/k/a2"])
async def test_another_callers_id_with_another_request_is_neither_refused_nor_answered(runtime, other):
    store = IdempotencyStore(runtime.redis_client, 60)
    request_id = f"req-{uuid.uuid4()}"
    await store.complete(await store.begin(key("t1/k/a", "Forget", request_id, b"mine")), b"my response")
    theirs = await store.begin(key(other, "Forget", request_id, b"theirs"))
    assert isinstance(theirs, Claim)
    await store.complete(theirs, b"their response")
    assert await store.begin(key("t1/k/a", "Forget", request_id, b"mine")) == b"my response"
    with pytest.raises(IdempotencyConflict):
        await store.begin(key("t1/k/a", "Forget", request_id, b"another of mine"))


# Each mutation carrying a request_id: (prepare, call). prepare readies what the caller's call changes
# and returns its name (a memory id, a session, the caller's tag), which the call's answer holds.
async def _own_memory(client, tag: str):
    return (await client.write([MemoryInput(f"{tag} keeps a note about invoices", kind="fact")])).memories[0].id


async def _own_session(client, tag: str):
    await client.write([MemoryInput(f"{tag} greeted the customer", kind="turn", session_id=f"s-{tag}"),
                        MemoryInput(f"{tag} is drafting a reply", kind="turn", layer="working", session_id=f"s-{tag}")])
    return f"s-{tag}"


async def _nothing(client, tag: str):
    return tag


MUTATIONS = {
    "Write": (_nothing, lambda client, tag, _, rid: client.write(
        [MemoryInput(f"{tag} wrote this", kind="fact")], request_id=rid)),
    "Forget": (_own_memory, lambda client, tag, memory_id, rid: client.forget(ids=[memory_id], request_id=rid)),
    "UpdateMemory": (_own_memory, lambda client, tag, memory_id, rid: client.update_memory(
        memory_id, content=f"{tag} changed the note", request_id=rid)),
    "Reflect": (_own_session, lambda client, tag, session, rid: client.reflect(session_id=session, request_id=rid)),
    "CloseSession": (_own_session, lambda client, tag, session, rid: client.close_session(session, request_id=rid)),
}


async def test_every_rpc_with_a_request_id_is_deduplicated_and_tested_here():
    with_ids = {f"/memplane.v1.{service.name}/{method.name}"
                for module in (memory_service_pb2, admin_service_pb2)
                for service in module.DESCRIPTOR.services_by_name.values()
                for method in service.methods if "request_id" in method.input_type.fields_by_name}
    assert with_ids == IDEMPOTENT_METHODS == {f"/memplane.v1.MemoryService/{m}" for m in MUTATIONS}


@pytest.mark.parametrize("method", sorted(MUTATIONS))
@pytest.mark.parametrize("pair", [("a1", "a2"), ("writer", "writer-2")])
async def test_two_callers_of_a_tenant_reusing_a_request_id_both_have_their_call_applied(deps, runtime, method, pair):
    """Two agents, or two API keys, of one tenant send one request id with different requests:
    both are applied and neither learns of the other; the first caller's repeat is answered with
    its first response, not applied again."""
    prepare, call = MUTATIONS[method]
    async with serving(deps, runtime) as served:
        tenant_id, keys = await served.tenant()
        _, keys["writer-2"] = await served.services.admin.create_api_key(PLATFORM, tenant_id, None, Role.WRITER, "w2")
        async with AsyncMemoryClient(served.address, keys[pair[0]]) as first, \
                AsyncMemoryClient(served.address, keys[pair[1]]) as second:
            targets = [await prepare(first, "caller-one"), await prepare(second, "caller-two")]
            request_id = str(uuid.uuid4())
            mine = await call(first, "caller-one", targets[0], request_id)
            theirs = await call(second, "caller-two", targets[1], request_id)
            # Each answer is of its own caller's call: it names that caller's target, never the other's.
            assert targets[1] in repr(theirs) and targets[0] not in repr(theirs)
            again = await call(first, "caller-one", targets[0], request_id)
            # A repeated Write answers its first memories, its results saying they were replayed.
            assert getattr(again, "memories", again) == getattr(mine, "memories", mine)


async def test_abandoned_claim_lets_a_retry_run(runtime):
    store = IdempotencyStore(runtime.redis_client, 60)
    await store.abandon(await store.begin(key("t1/k/a", "Write", "req-4", b"x")))
    assert isinstance(await store.begin(key("t1/k/a", "Write", "req-4", b"x")), Claim)


async def test_a_claim_nobody_renews_lapses_within_the_lease(runtime):
    store = IdempotencyStore(runtime.redis_client, 60)
    request_id = f"req-{uuid.uuid4()}"
    await store.begin(key("t1/k/a", "Write", request_id, b"x"))  # its server dies: no renewal, no abandon
    started = time.monotonic()
    retried = await store.begin(key("t1/k/a", "Write", request_id, b"x"))
    assert isinstance(retried, Claim) and time.monotonic() - started <= LEASE_SECONDS + 0.5


async def test_a_renewed_claim_outlives_its_lease(runtime):
    store = IdempotencyStore(runtime.redis_client, 60)
    request_id = f"req-{uuid.uuid4()}"
    claim = await store.begin(key("t1/k/a", "Write", request_id, b"x"))
    for _ in range(4):
        await asyncio.sleep(RENEW_EVERY_SECONDS)
        assert await store.renew(claim)
    assert await store.client.pttl(claim.key) > (LEASE_SECONDS - RENEW_EVERY_SECONDS) * 1000


async def test_an_old_claim_cannot_release_or_renew_a_newer_one(runtime):
    store = IdempotencyStore(runtime.redis_client, 60)
    request_id = f"req-{uuid.uuid4()}"
    old = await store.begin(key("t1/k/a", "Write", request_id, b"x"))
    await store.client.delete(old.key)  # as if its lease ran out
    new = await store.begin(key("t1/k/a", "Write", request_id, b"x"))
    await store.abandon(old)
    assert not await store.renew(old)
    assert await store.client.get(new.key) == new.value


async def test_key_resolves_to_its_tenant_and_agent(deps, make_tenant):
    world = await make_tenant()
    row, secret = await AdminService(deps.tenancy).create_api_key(PLATFORM, world.tenant_id, "a1", Role.AGENT, "k")
    caller = await Authenticator(deps.tenancy).resolve(secret, None)
    assert (caller.tenant_id, caller.agent_id, caller.role) == (world.tenant_id, "a1", Role.AGENT)


@pytest.mark.parametrize("presented", [None, "", "mpk_nope_nope", "garbage"])
async def test_missing_or_unknown_key_is_unauthenticated(deps, presented):
    with pytest.raises(MemplaneError) as err:
        await Authenticator(deps.tenancy).resolve(presented, None)
    assert err.value.code is Code.UNAUTHENTICATED


async def test_wrong_secret_for_a_real_key_id_is_unauthenticated(deps, make_tenant):
    world = await make_tenant()
    row, secret = await AdminService(deps.tenancy).create_api_key(PLATFORM, world.tenant_id, None, Role.WRITER, "k")
    with pytest.raises(MemplaneError) as err:
        await Authenticator(deps.tenancy).resolve(secret[:-2] + "xx", None)
    assert err.value.code is Code.UNAUTHENTICATED


async def test_revoked_key_is_refused(deps, make_tenant):
    world = await make_tenant()
    admin = AdminService(deps.tenancy)
    key, secret = await admin.create_api_key(PLATFORM, world.tenant_id, None, Role.WRITER, "k")
    await admin.revoke_api_key(PLATFORM, key.id)
    with pytest.raises(MemplaneError) as err:
        await Authenticator(deps.tenancy).resolve(secret, None)
    assert err.value.code is Code.UNAUTHENTICATED


async def test_agent_key_cannot_act_as_another_agent(deps, make_tenant):
    world = await make_tenant()
    row, secret = await AdminService(deps.tenancy).create_api_key(PLATFORM, world.tenant_id, "a1", Role.AGENT, "k")
    with pytest.raises(MemplaneError) as err:
        await Authenticator(deps.tenancy).resolve(secret, "a2")
    assert err.value.code is Code.PERMISSION_DENIED


async def test_tenant_key_may_act_only_as_its_own_tenants_agents(deps, make_tenant):
    world, other = await make_tenant(), await make_tenant()
    row, secret = await AdminService(deps.tenancy).create_api_key(PLATFORM, world.tenant_id, None, Role.WRITER, "k")
    caller = await Authenticator(deps.tenancy).resolve(secret, "a2")
    assert caller.agent_id == "a2"
    await AdminService(deps.tenancy).create_agent(PLATFORM, other.tenant_id, "only-there", "")
    with pytest.raises(MemplaneError) as err:
        await Authenticator(deps.tenancy).resolve(secret, "only-there")
    assert err.value.code is Code.NOT_FOUND


async def test_tenant_admin_cannot_manage_another_tenant(deps, make_tenant):
    world, other = await make_tenant(), await make_tenant()
    admin = AdminService(deps.tenancy)
    row, secret = await admin.create_api_key(PLATFORM, world.tenant_id, None, Role.TENANT_ADMIN, "k")
    caller = await Authenticator(deps.tenancy).resolve(secret, None)
    with pytest.raises(MemplaneError) as err:
        await admin.create_api_key(caller, other.tenant_id, None, Role.WRITER, "evil")
    assert err.value.code is Code.PERMISSION_DENIED


async def test_migrations_run_again_apply_nothing(settings):
    conn = await asyncpg.connect(settings.database_url)
    try:
        assert await migrate(conn) == []
    finally:
        await conn.close()


async def test_concurrent_migrations_wait_for_the_lock(settings):
    conns = [await asyncpg.connect(settings.database_url) for _ in range(3)]
    try:
        results = await asyncio.gather(*(migrate(c) for c in conns))
        assert results == [[], [], []]
    finally:
        for c in conns:
            await c.close()


async def test_search_settings_survive_connection_reuse(deps):
    pool = deps.memories.pool
    for _ in range(3):  # released connections keep their startup settings
        async with pool.acquire() as conn:
            assert await conn.fetchval("SHOW hnsw.ef_search") == str(deps.settings.hnsw_ef_search)
            assert await conn.fetchval("SHOW hnsw.iterative_scan") == "relaxed_order"
            assert await conn.fetchval("SHOW plan_cache_mode") == "force_custom_plan"


async def test_a_released_connection_carries_no_caller(settings):
    """The pool does not reset sessions on release (stores/postgres/pool.py): the caller's role and
    settings must end with the caller's transaction, also when it fails."""
    pool = await create_pool(settings.database_url, size=1, ef_search=settings.hnsw_ef_search)  # one connection
    caller = Caller(key_id="k", role=Role.WRITER, tenant_id="t-released", agent_id="a1", domains={"d1": True})
    try:
        async with pool.acquire() as first:
            owner = await first.fetchval("SELECT current_user")
        with pytest.raises(asyncpg.DivisionByZeroError):
            async with caller_session(pool, caller) as conn:
                assert await conn.fetchval("SELECT current_setting('memplane.tenant_id')") == "t-released"
                await conn.fetchval("SELECT 1 / 0")
        async with caller_session(pool, caller):
            pass
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT current_user") == owner
            assert await conn.fetchval("SELECT current_setting('memplane.tenant_id', true)") in (None, "")
            assert await conn.fetchval("SELECT current_setting('memplane.read_domains', true)") in (None, "")
    finally:
        await pool.close()
