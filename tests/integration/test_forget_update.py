"""Forget, update, history and feedback against real PostgreSQL."""
from __future__ import annotations

import pytest

from memplane_server.core.errors import MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Status
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService

pytestmark = pytest.mark.asyncio(loop_scope="session")


def draft(content: str, **kw) -> MemoryDraft:
    # Events, not facts: facts this alike would merge at write time, which other tests cover.
    return MemoryDraft(**{**dict(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.EVENT,
                                 content=content), **kw})


async def test_soft_forget_is_restorable(deps, make_tenant):
    world = await make_tenant()
    [m] = await WriteService(deps).write(world.writer, [draft("The wifi password is hunter2")])
    result = await ForgetService(deps).forget(world.writer, ids=[str(m.id)], f=None, hard=False, dry_run=False, reason="rotate")
    assert result.count == 1
    assert await SearchService(deps).search(world.writer, SearchQuery("wifi password")) == []
    restored = await MemoriesService(deps).update(world.writer, str(m.id), {"status": Status.ACTIVE})
    assert restored.status is Status.ACTIVE
    entries, _ = await MemoriesService(deps).history(world.writer, memory_id=str(m.id), entity=None, attribute=None,
                                                    page_size=10, page_token="")
    assert [e.action for e in entries] == ["restored", "deleted", "created"]


async def test_hard_forget_erases_row_and_history(deps, make_tenant):
    world = await make_tenant()
    [m] = await WriteService(deps).write(world.writer, [draft("Patient has condition X", session_id="s-clinic", entity="patient")])
    await ForgetService(deps).forget(world.writer, ids=[str(m.id)], f=None, hard=True, dry_run=False, reason="erasure")
    pool = deps.memories.pool
    assert await pool.fetch("SELECT action FROM memory_history WHERE memory_id = $1", m.id) == []
    changes = await pool.fetch("SELECT change, session_id, entity, history_seq FROM memory_changes"
                               " WHERE memory_id = $1 ORDER BY id", m.id)
    assert [r["change"] for r in changes] == ["created", "erased"]
    # The earlier entry names no subject, and the history row it names (with the memory's) is gone.
    assert changes[0]["session_id"] is None and changes[0]["entity"] is None
    assert await pool.fetchval("SELECT count(*) FROM memory_history WHERE seq = $1", changes[0]["history_seq"]) == 0
    with pytest.raises(MemplaneError):
        await MemoriesService(deps).get(world.writer, str(m.id))


async def test_forget_by_filter_with_dry_run_changes_nothing(deps, make_tenant):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, [draft("a", user_id="u1"), draft("b", user_id="u1"), draft("c", user_id="u2")])
    forget = ForgetService(deps)
    dry = await forget.forget(world.writer, ids=None, f=MemoryFilter(user_id="u1"), hard=True, dry_run=True, reason="")
    assert dry.count == 2
    assert (await MemoriesService(deps).stats(world.writer, MemoryFilter())).total == 3
    done = await forget.forget(world.writer, ids=None, f=MemoryFilter(user_id="u1"), hard=True, dry_run=False, reason="")
    assert done.count == 2
    assert (await MemoriesService(deps).stats(world.writer, MemoryFilter())).total == 1


async def test_forget_with_an_empty_filter_is_refused(deps, make_tenant):
    world = await make_tenant()
    with pytest.raises(MemplaneError) as err:
        await ForgetService(deps).forget(world.writer, ids=None, f=MemoryFilter(), hard=True, dry_run=False, reason="")
    assert err.value.reason == "FILTER_REQUIRED"


async def test_forget_is_audited(deps, make_tenant):
    world = await make_tenant()
    [m] = await WriteService(deps).write(world.writer, [draft("x")])
    await ForgetService(deps).forget(world.writer, ids=[str(m.id)], f=None, hard=False, dry_run=False, reason="gdpr")
    event = (await deps.tenancy.list_audit(world.tenant_id, None, 10))[0]  # newest first
    assert event.action == "Forget" and event.details["reason"] == "gdpr"


async def test_update_of_content_re_embeds_for_search(deps, make_tenant):
    world = await make_tenant()
    [m] = await WriteService(deps).write(world.writer, [draft("The team standup is at 9")])
    await MemoriesService(deps).update(world.writer, str(m.id), {"content": "Ramen shop opens at noon"})
    [hit] = await SearchService(deps).search(world.writer, SearchQuery("ramen", top_k=1))
    assert hit.memory.id == m.id


async def test_feedback_moves_confidence_and_is_in_history(deps, make_tenant):
    world = await make_tenant()
    [m] = await WriteService(deps).write(world.writer, [draft("x", confidence=0.8)])
    [up] = await MemoriesService(deps).feedback(world.writer, [str(m.id)], True, "helped")
    assert up.confidence == pytest.approx(0.9)
    [down] = await MemoriesService(deps).feedback(world.writer, [str(m.id)], False, "")
    assert down.confidence == pytest.approx(0.8)


async def test_list_pages_through_everything_once(deps, make_tenant):
    world = await make_tenant()
    written = await WriteService(deps).write(world.writer, [draft(f"item {i}") for i in range(7)])
    seen, token = [], ""
    while True:
        page, token = await MemoriesService(deps).list(world.writer, MemoryFilter(), 3, token)
        seen.extend(m.id for m in page)
        if not token:
            break
    assert sorted(seen) == sorted(m.id for m in written)


async def test_garbage_page_token_is_invalid_argument(deps, make_tenant):
    world = await make_tenant()
    with pytest.raises(MemplaneError) as err:
        await MemoriesService(deps).list(world.writer, MemoryFilter(), 3, "not-a-token")
    assert err.value.reason == "INVALID_PAGE_TOKEN"
