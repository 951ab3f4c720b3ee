"""Grouping many rows never runs on the event loop, and compares at most MEMPLANE_GROUPING_MAX_ROWS
of the newest (2,000 lessons clustered on the loop once stalled every other call for 7 s)."""
from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from memplane_server.core.model import Kind, MemoryDraft
from memplane_server.core.reflection.reflection import ReflectInput
from memplane_server.services.reflection import consolidate as consolidate_module
from memplane_server.services.reflection import reflect as reflect_module
from memplane_server.services.reflection.consolidate import ConsolidateService
from memplane_server.services.write.service import WriteService
from tests.support.services import reflect_service

pytestmark = pytest.mark.asyncio(loop_scope="session")

SIMILAR = ["Drain the job queue before rotating the deploy keys", "Always empty the queue first when you rotate keys"]
UNRELATED = ["Run the database migrations before deploying the API", "Pin the compiler version in the build image"]


def lesson(content: str, **kw) -> MemoryDraft:
    return MemoryDraft(**{**dict(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.LESSON,
                                 content=content), **kw})


def recording_threads(monkeypatch, module, name: str) -> list[int]:
    """Replaces module.name by a wrapper noting the thread each call runs in."""
    seen: list[int] = []
    original = getattr(module, name)

    def wrapper(*args, **kwargs):
        seen.append(threading.get_ident())
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return seen


async def test_consolidation_clusters_in_a_worker_thread_not_on_the_event_loop(deps, make_tenant, monkeypatch):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, [lesson(c) for c in SIMILAR])
    seen = recording_threads(monkeypatch, consolidate_module, "clusters")
    await ConsolidateService(deps, WriteService(deps)).consolidate(world.writer, scope=None, domain=None, dry_run=True)
    assert seen and threading.get_ident() not in seen


async def test_session_reflection_groups_near_duplicates_off_the_event_loop(deps, make_tenant, monkeypatch):
    world = await make_tenant()
    await WriteService(deps).write(world.writer, [
        lesson(c, kind=Kind.EVENT, session_id="s1") for c in ("The user moved to Shanghai", "The user moved to Shanghai.")])
    seen = recording_threads(monkeypatch, reflect_module, "near_duplicate_groups")
    outcome = await reflect_service(deps).run(world.writer, ReflectInput(session_id="s1"))
    assert outcome.merged_count == 1
    assert seen and threading.get_ident() not in seen


async def test_consolidation_compares_only_the_newest_rows_the_cap_allows(deps, make_tenant):
    world = await make_tenant()
    write = WriteService(deps)
    await write.write(world.writer, [lesson(c) for c in SIMILAR])  # the oldest two
    await write.write(world.writer, [lesson(c) for c in UNRELATED])
    capped = replace(deps, settings=deps.settings.model_copy(update={"grouping_max_rows": 2}))
    found = await ConsolidateService(capped, WriteService(capped)).consolidate(
        world.writer, scope=None, domain=None, dry_run=True)
    assert (found.clusters, found.considered, found.left_out) == ([], 2, 2)
    wide = replace(deps, settings=deps.settings.model_copy(update={"grouping_max_rows": 4}))
    found = await ConsolidateService(wide, WriteService(wide)).consolidate(
        world.writer, scope=None, domain=None, dry_run=True)
    assert [sorted(m.content for m in c.members) for c in found.clusters] == [sorted(SIMILAR)]
    assert (found.considered, found.left_out) == (4, 0)
