"""The tenancy story of the issue, end to end through the use cases: teams A and B share the
`payments` domain, C does not; private, global and domain memories reach exactly whom they should."""
from __future__ import annotations

import uuid

import pytest

from memplane_server.core.access.caller import Role
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, Scope
from memplane_server.services.access.auth import Authenticator
from memplane_server.services.admin import AdminService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService
from tests.integration.conftest import PLATFORM

pytestmark = pytest.mark.asyncio(loop_scope="session")


def draft(content: str, kind: Kind, scope: Scope, domain: str | None = None) -> MemoryDraft:
    return MemoryDraft(scope=scope, domain=domain, agent_id=None, layer=None, kind=kind, content=content)


async def found(deps, caller, query: str) -> set[str]:
    return {h.memory.content for h in await SearchService(deps).search(caller, SearchQuery(query, top_k=50))}


async def test_payments_domain_story(deps):
    admin = AdminService(deps.tenancy)
    suffix = uuid.uuid4().hex[:6]
    payments = f"payments-{suffix}"
    await admin.create_domain(PLATFORM, payments, "")
    keys = {}
    for team in ("a", "b", "c"):
        tenant = f"team-{team}-{suffix}"
        await admin.create_tenant(PLATFORM, tenant, "", 0, False)
        for agent in ("1", "2"):
            await admin.create_agent(PLATFORM, tenant, f"{team}{agent}", "")
            _, keys[f"{team}{agent}"] = await admin.create_api_key(PLATFORM, tenant, f"{team}{agent}", Role.AGENT, "")
        _, keys[team] = await admin.create_api_key(PLATFORM, tenant, None, Role.WRITER, "")
        if team != "c":
            await admin.grant_domain(PLATFORM, payments, tenant, True)
    auth = Authenticator(deps.tenancy)

    async def caller(name: str):
        auth._cache.clear()  # every step below sees grants as they are now
        return await auth.resolve(keys[name], None)

    write = WriteService(deps)
    await write.write(await caller("a"), [draft("Lesson: retry card refunds after 5 minutes", Kind.LESSON, Scope.DOMAIN, payments)])
    await write.write(await caller("a1"), [draft("A1 private: refunds dashboard password hint", Kind.FACT, Scope.PRIVATE)])
    await write.write(await caller("a"), [draft("A global: refunds are owned by team A", Kind.FACT, Scope.GLOBAL)])

    lesson, private, glob = ("Lesson: retry card refunds after 5 minutes",
                             "A1 private: refunds dashboard password hint", "A global: refunds are owned by team A")
    assert lesson in await found(deps, await caller("b"), "refunds")
    assert lesson in await found(deps, await caller("b2"), "refunds")
    assert lesson not in await found(deps, await caller("c"), "refunds")
    assert private in await found(deps, await caller("a1"), "refunds")
    assert private not in await found(deps, await caller("a2"), "refunds")
    assert private not in await found(deps, await caller("b"), "refunds")
    assert glob in await found(deps, await caller("a1"), "refunds")
    assert glob in await found(deps, await caller("a2"), "refunds")
    assert glob in await found(deps, await caller("a"), "refunds")
    for outsider in ("b", "b1", "c", "c1"):
        assert glob not in await found(deps, await caller(outsider), "refunds")

    await admin.revoke_domain_grant(PLATFORM, payments, f"team-a-{suffix}")
    assert lesson not in await found(deps, await caller("a"), "refunds")
    assert lesson not in await found(deps, await caller("a1"), "refunds")
    with pytest.raises(MemplaneError) as err:
        await write.write(await caller("a"), [draft("after revocation", Kind.LESSON, Scope.DOMAIN, payments)])
    assert err.value.code is Code.PERMISSION_DENIED
    assert lesson in await found(deps, await caller("b"), "refunds")
