"""Signals are memories' equals: what Search keeps of a query that found nothing (a signal for
reflection) is screened by the tenant's content policy, sealed (under the key of the user the
search was filtered to), listed only to its own agent and the tenant's admins, and removed by a
forget naming the user and by the user's erasure, whose receipt counts it."""
from __future__ import annotations

import dataclasses
import random
import string
import uuid

import pytest

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import MemoryFilter
from memplane_server.services.content.admin import ContentPolicyService
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.stores.postgres.content.user_keys import remove_shredded, sealed_under_users
from memplane_server.stores.postgres.session import caller_session
from memplane_server.stores.sealing import OPENERS, Shredded, is_user_key_ref
from tests.support.clear_text import database_text, redis_text
from tests.support.services import erasure_service, reflect_service

pytestmark = pytest.mark.asyncio(loop_scope="session")


def planted_secrets() -> tuple[str, str]:
    """An AWS access key id and a GitHub token of their real formats, new for each test, so that no
    other test's rows can hold them."""
    rng = random.SystemRandom()
    aws = "AKIA" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(16))
    github = "ghp_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))
    return aws, github


def admin_of(caller: Caller) -> Caller:
    return dataclasses.replace(caller, role=Role.TENANT_ADMIN, key_id=f"{caller.tenant_id}-admin", agent_id=None)


async def search_nothing(deps, caller: Caller, text: str, user: str | None = None) -> None:
    service = SearchService(deps)
    assert await service.search(caller, SearchQuery(text, filter=MemoryFilter(user_id=user))) == []
    for task in list(service._background):  # the signal is kept after the answer
        await task


async def signals(deps, caller: Caller) -> list[str]:
    listed, _ = await reflect_service(deps).decisions(
        caller, subject_type="search", subject_id=None, page_size=100, page_token="")
    return sorted(d.reason for d in listed)


async def test_a_raw_dump_holds_neither_the_query_nor_a_secret_planted_in_it(deps, make_tenant):
    world = await make_tenant()
    aws, github = planted_secrets()
    marker = f"quokka-{uuid.uuid4().hex[:10]}"
    user = f"user-{uuid.uuid4().hex[:8]}"
    await search_nothing(deps, world.writer, f"{marker} deploy key {aws}", user)
    await search_nothing(deps, world.agent1, f"{marker} token {github}", user)
    await search_nothing(deps, world.agent2, f"{marker} with no secret")

    assert await deps.memories.pool.fetchval(
        "SELECT count(*) FROM reflection_decisions WHERE tenant_id = $1 AND subject_type = 'search'", world.tenant_id) == 3
    dump = await database_text(deps.memories.pool) + await redis_text(deps.working.client)
    assert not [text for text in (marker, aws, github) if text in dump]


async def test_a_secret_in_a_query_is_redacted_or_the_signal_not_kept_as_the_tenant_policy_says(deps, make_tenant):
    world = await make_tenant()
    aws, github = planted_secrets()
    await search_nothing(deps, world.agent1, f"which deploy key is {aws}")
    assert await signals(deps, world.agent1) == ["nothing found for: which deploy key is [REDACTED:aws_access_key]"]

    await ContentPolicyService(deps).set(admin_of(world.writer), "", "", {"secret": "refuse"})
    await search_nothing(deps, world.agent1, f"the token {github} failed")  # the search still answers
    assert await signals(deps, world.agent1) == ["nothing found for: which deploy key is [REDACTED:aws_access_key]"]


async def test_an_agent_lists_only_its_own_signals_an_admin_the_tenants_and_another_tenant_none(deps, make_tenant):
    world, other = await make_tenant(), await make_tenant()
    for caller in (world.agent1, world.agent2, world.writer):
        await search_nothing(deps, caller, f"asked by {caller.agent_id or 'the tenant'}")

    assert await signals(deps, world.agent1) == ["nothing found for: asked by a1"]
    assert await signals(deps, world.agent2) == ["nothing found for: asked by a2"]
    assert await signals(deps, admin_of(world.writer)) == [
        "nothing found for: asked by a1", "nothing found for: asked by a2", "nothing found for: asked by the tenant"]
    assert await signals(deps, other.agent1) == [] and await signals(deps, admin_of(other.writer)) == []
    # Row-level security alone keeps them apart too: a1's session reads no other agent's signal.
    async with caller_session(deps.decisions.pool, world.agent1) as conn:
        agents = await conn.fetch("SELECT agent_id FROM reflection_decisions WHERE subject_type = 'search'")
    assert [r["agent_id"] for r in agents] == ["a1"]


async def test_an_erasure_counts_the_users_signals_removes_them_and_shreds_copies_taken_before(deps, make_tenant):
    world = await make_tenant()
    user, marker = f"user-{uuid.uuid4().hex[:8]}", f"wombat-{uuid.uuid4().hex[:8]}"
    for caller in (world.agent1, world.agent2, world.writer):
        await search_nothing(deps, caller, f"{marker} for {user}", user)
    await search_nothing(deps, world.agent1, "about nobody in particular")
    before = await deps.memories.pool.fetch(
        "SELECT tenant_id, reason, sealed_key FROM reflection_decisions WHERE tenant_id = $1 AND user_id = $2",
        world.tenant_id, user)  # as a backup taken now holds them
    assert len(before) == 3 and all(is_user_key_ref(r["sealed_key"]) and marker not in r["reason"] for r in before)

    erased = await erasure_service(deps).erase(admin_of(world.writer), user)

    counts = erased.receipt.counts
    assert (counts["postgres.reflection_decisions"], counts["user_keys.destroyed"]) == (3, 1)
    assert await signals(deps, admin_of(world.writer)) == ["nothing found for: about nobody in particular"]
    for row in before:
        with pytest.raises(Shredded):
            OPENERS.open_text(row["sealed_key"], row["tenant_id"], "decision_reason", row["reason"])


async def test_an_agents_erasure_keeps_the_users_key_while_another_agents_signal_needs_it(deps, make_tenant):
    world = await make_tenant()
    user = f"user-{uuid.uuid4().hex[:8]}"
    await search_nothing(deps, world.agent1, "mine", user)
    await search_nothing(deps, world.agent2, "theirs", user)

    erased = await erasure_service(deps).erase(world.agent1, user)

    assert (erased.receipt.counts["postgres.reflection_decisions"], erased.receipt.counts["user_keys.destroyed"]) == (1, 0)
    assert await signals(deps, world.agent1) == []
    assert await signals(deps, world.agent2) == ["nothing found for: theirs"]
    assert is_user_key_ref(await deps.memories.pool.fetchval(
        "SELECT sealed_key FROM reflection_decisions WHERE tenant_id = $1 AND user_id = $2", world.tenant_id, user))


async def test_a_forget_naming_a_user_removes_the_callers_signals_about_them(deps, make_tenant):
    world = await make_tenant()
    user = f"user-{uuid.uuid4().hex[:8]}"
    await search_nothing(deps, world.agent1, "about the user", user)
    await search_nothing(deps, world.agent1, "about someone else", "someone-else")
    await search_nothing(deps, world.agent2, "theirs about the user", user)

    await ForgetService(deps).forget(world.agent1, ids=None, f=MemoryFilter(user_id=user), hard=False, dry_run=False,
                                     reason="")

    assert await signals(deps, world.agent1) == ["nothing found for: about someone else"]
    assert await signals(deps, world.agent2) == ["nothing found for: theirs about the user"]


async def test_a_sweep_after_a_restore_removes_the_signals_sealed_under_an_erased_users_key(deps, make_tenant):
    world = await make_tenant()
    user = f"user-{uuid.uuid4().hex[:8]}"
    await search_nothing(deps, world.agent1, "asked before the erasure", user)
    ref = await deps.memories.pool.fetchval(
        "SELECT sealed_key FROM reflection_decisions WHERE tenant_id = $1 AND user_id = $2", world.tenant_id, user)
    # As a backup taken before the erasure restores it: the row is back, the user's key is not.
    assert deps.keys.users.destroy(world.tenant_id, user)

    async with deps.memories.pool.acquire() as conn:
        assert ref in await sealed_under_users(conn)
        await remove_shredded(conn, [ref])
    assert await signals(deps, world.agent1) == []
