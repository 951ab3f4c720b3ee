"""Every query path, tried across tenants, agents and domains (DESIGN §1)."""
from __future__ import annotations

import uuid

import pytest

from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Scope
from memplane_server.core.reflection.reflection import ReflectInput
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService
from tests.support.services import reflect_service

pytestmark = pytest.mark.asyncio(loop_scope="session")


def draft(content: str, **kw) -> MemoryDraft:
    return MemoryDraft(**{**dict(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.FACT,
                                 content=content, session_id="shared-session", entity="secret"), **kw})


@pytest.fixture
def domain_name():
    return f"payments-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def worlds(deps, make_tenant, domain_name):
    a = await make_tenant({domain_name: True})
    b = await make_tenant({domain_name: False})
    c = await make_tenant()
    write = WriteService(deps)
    [global_a] = await write.write(a.writer, [draft("A global: the vault code is 1234", scope=Scope.GLOBAL)])
    [private_a1] = await write.write(a.agent1, [draft("A1 private: the vault code is 1234", scope=Scope.PRIVATE)])
    [domain_a] = await write.write(a.writer, [draft("Domain lesson: the vault code is 1234", kind=Kind.LESSON,
                                                    scope=Scope.DOMAIN, domain=domain_name)])
    return a, b, c, {"global": global_a, "private": private_a1, "domain": domain_a}


async def visible_ids(deps, caller) -> set:
    hits = await SearchService(deps).search(caller, SearchQuery("vault code", top_k=50))
    listed, _ = await MemoriesService(deps).list(caller, MemoryFilter(), 500, "")
    return {h.memory.id for h in hits} | {m.id for m in listed}


async def test_search_and_list_follow_the_visibility_rule(deps, worlds):
    a, b, c, m = worlds
    assert await visible_ids(deps, a.agent1) == {m["global"].id, m["private"].id, m["domain"].id}
    assert await visible_ids(deps, a.agent2) == {m["global"].id, m["domain"].id}
    assert await visible_ids(deps, a.writer) == {m["global"].id, m["domain"].id}
    assert await visible_ids(deps, b.writer) == {m["domain"].id}
    assert await visible_ids(deps, b.agent1) == {m["domain"].id}
    assert await visible_ids(deps, c.writer) == set()
    assert await visible_ids(deps, c.agent1) == set()


async def test_get_of_an_invisible_memory_is_not_found(deps, worlds):
    a, b, c, m = worlds
    for caller, memory in [(b.writer, m["global"]), (b.agent1, m["private"]), (a.agent2, m["private"]),
                           (c.writer, m["domain"])]:
        with pytest.raises(MemplaneError) as err:
            await MemoriesService(deps).get(caller, str(memory.id))
        assert err.value.code is Code.NOT_FOUND and err.value.reason == "MEMORY_NOT_FOUND"
        assert err.value.metadata == {}


async def test_update_of_an_invisible_memory_changes_nothing(deps, worlds):
    a, b, c, m = worlds
    for caller, memory in [(b.writer, m["global"]), (a.agent2, m["private"]), (c.writer, m["domain"])]:
        with pytest.raises(MemplaneError) as err:
            await MemoriesService(deps).update(caller, str(memory.id), {"content": "hijacked"})
        assert err.value.code is Code.NOT_FOUND
    for key in m:
        owner = a.agent1
        assert (await MemoriesService(deps).get(owner, str(m[key].id))).content != "hijacked"


async def test_forget_by_id_or_filter_cannot_reach_other_tenants(deps, worlds):
    a, b, c, m = worlds
    forget = ForgetService(deps)
    for x in m.values():
        with pytest.raises(MemplaneError) as err:
            await forget.forget(c.writer, ids=[str(x.id)], f=None, hard=True, dry_run=False, reason="")
        assert err.value.code is Code.NOT_FOUND and err.value.reason == "MEMORY_NOT_FOUND"
    by_filter = await forget.forget(c.writer, ids=None, f=MemoryFilter(entity="secret"), hard=True, dry_run=False, reason="")
    assert by_filter.count == 0
    by_filter = await forget.forget(a.agent2, ids=None, f=MemoryFilter(session_id="shared-session"), hard=False,
                                    dry_run=True, reason="")
    assert m["private"].id not in by_filter.ids
    assert await visible_ids(deps, a.agent1) == {x.id for x in m.values()}


async def test_history_and_stats_stay_inside_visibility(deps, worlds):
    a, b, c, m = worlds
    memories = MemoriesService(deps)
    entries, _ = await memories.history(c.writer, memory_id=None, entity="secret", attribute=None, page_size=50, page_token="")
    assert entries == []
    with pytest.raises(MemplaneError):
        await memories.history(b.writer, memory_id=str(m["private"].id), entity=None, attribute=None, page_size=5, page_token="")
    assert (await memories.stats(c.writer, MemoryFilter())).total == 0
    assert (await memories.stats(a.agent2, MemoryFilter())).total == 2


async def test_feedback_cannot_touch_other_tenants(deps, worlds):
    a, b, c, m = worlds
    with pytest.raises(MemplaneError) as err:
        await MemoriesService(deps).feedback(c.writer, [str(m["global"].id)], False, "")
    assert err.value.code is Code.NOT_FOUND


async def test_reflect_merges_only_what_the_caller_sees(deps, worlds):
    a, b, c, m = worlds
    await reflect_service(deps).run(c.writer, ReflectInput(session_id="shared-session"))
    assert await visible_ids(deps, a.agent1) >= {x.id for x in m.values()}


async def test_read_only_domain_member_cannot_write_the_domain(deps, worlds, domain_name):
    a, b, c, m = worlds
    with pytest.raises(MemplaneError) as err:
        await WriteService(deps).write(b.writer, [draft("B writes", scope=Scope.DOMAIN, domain=domain_name)])
    assert err.value.code is Code.PERMISSION_DENIED


async def test_read_only_member_sees_but_cannot_change_a_domain_memory(deps, worlds):
    a, b, c, m = worlds
    memories = MemoriesService(deps)
    assert (await memories.get(b.writer, str(m["domain"].id))).content.startswith("Domain lesson")
    with pytest.raises(MemplaneError) as err:
        await memories.update(b.writer, str(m["domain"].id), {"content": "edited by B"})
    assert err.value.code is Code.PERMISSION_DENIED and err.value.reason == "MEMORY_READ_ONLY"
    with pytest.raises(MemplaneError):
        await memories.feedback(b.writer, [str(m["domain"].id)], False, "")
    with pytest.raises(MemplaneError) as err:
        await ForgetService(deps).forget(b.writer, ids=[str(m["domain"].id)], f=None, hard=True, dry_run=False, reason="")
    assert err.value.code is Code.PERMISSION_DENIED and err.value.reason == "MEMORY_READ_ONLY"


async def test_agent_key_cannot_change_its_tenants_global_memory(deps, worlds):
    a, b, c, m = worlds
    with pytest.raises(MemplaneError) as err:
        await MemoriesService(deps).update(a.agent1, str(m["global"].id), {"content": "by an agent"})
    assert err.value.code is Code.PERMISSION_DENIED


async def test_agent_key_cannot_forget_its_tenants_global_memory(deps, worlds):
    a, b, c, m = worlds
    with pytest.raises(MemplaneError) as err:
        await ForgetService(deps).forget(a.agent1, ids=[str(m["global"].id)], f=None, hard=True, dry_run=False,
                                         reason="")
    assert err.value.code is Code.PERMISSION_DENIED and err.value.reason == "MEMORY_READ_ONLY"
