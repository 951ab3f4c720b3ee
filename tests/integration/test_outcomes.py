"""Task outcomes move the confidence of the lessons and procedures a task used: a lesson that keeps
failing stops being served by default, one that keeps succeeding rises, and every change is in
its history with the task that caused it."""
from __future__ import annotations

import pytest

from memplane_server.core.errors import MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, Status
from memplane_server.core.reflection.reflection import ReflectInput, Task
from memplane_server.services.memories import MemoriesService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService
from tests.support.services import reflect_service

pytestmark = pytest.mark.asyncio(loop_scope="session")


def lesson(content: str, confidence: float) -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.LESSON, content=content,
                       confidence=confidence)


async def test_twenty_tasks_retire_the_lesson_that_keeps_failing_and_raise_the_one_that_works(deps, make_tenant):
    world = await make_tenant()
    [stale, good] = await WriteService(deps).write(world.writer, [
        lesson("Restart the cache before running the billing export", 0.9),
        lesson("Run the billing export after the nightly backup finishes", 0.6),
    ])
    memories = MemoriesService(deps)
    for n in range(20):
        failed = n % 4 == 0  # tasks 0, 4, 8, 12, 16: the stale lesson was used and the task failed
        used, outcome = ([stale.id], "failure") if failed else ([good.id], "success")
        await memories.feedback(world.writer, [str(i) for i in used], False, "", task_id=f"export-{n}", outcome=outcome)
    stale_now = await memories.get(world.writer, str(stale.id))
    good_now = await memories.get(world.writer, str(good.id))
    assert stale_now.confidence < deps.settings.pending_threshold and stale_now.status is Status.PENDING
    assert good_now.confidence > 0.95 and good_now.status is Status.ACTIVE
    hits = await SearchService(deps).search(world.writer, SearchQuery("how do I run the billing export?"))
    assert stale.id not in {h.memory.id for h in hits} and good.id in {h.memory.id for h in hits}


async def test_each_outcome_is_in_the_history_with_its_task(deps, make_tenant):
    world = await make_tenant()
    [used] = await WriteService(deps).write(world.writer, [lesson("Pin the compiler version in CI", 0.9)])
    memories = MemoriesService(deps)
    await memories.feedback(world.writer, [str(used.id)], False, "", task_id="ci-7", outcome="failure")
    history, _ = await memories.history(
        world.writer, memory_id=str(used.id), entity=None, attribute=None, page_size=5, page_token="")
    assert history[0].action == "feedback"
    assert history[0].reason == "used in task ci-7, failure: confidence 0.900 -> 0.765"


async def test_an_outcome_leaves_facts_as_they_are(deps, make_tenant):
    world = await make_tenant()
    [fact] = await WriteService(deps).write(world.writer, [MemoryDraft(
        scope=None, domain=None, agent_id=None, layer=None, kind=Kind.FACT, content="The API lives on port 8080")])
    [after] = await MemoriesService(deps).feedback(world.writer, [str(fact.id)], False, "", task_id="t", outcome="failure")
    assert after.confidence == fact.confidence and after.updated_at == fact.updated_at


async def test_a_reflected_task_applies_its_outcome_to_the_memories_it_used(deps, make_tenant):
    world = await make_tenant()
    [used] = await WriteService(deps).write(world.writer, [lesson("Use the staging token for smoke tests", 0.72)])
    task = Task("smoke-3", "run the smoke tests", outcome="failure", used_memory_ids=(str(used.id),))
    await reflect_service(deps).run(world.writer, ReflectInput(task=task))
    now = await MemoriesService(deps).get(world.writer, str(used.id))
    assert now.confidence == pytest.approx(0.72 * 0.85) and now.status is Status.PENDING


async def test_a_task_that_used_another_tenants_memory_is_refused_before_anything_changes(deps, make_tenant):
    mine, theirs = await make_tenant(), await make_tenant()
    [own] = await WriteService(deps).write(mine.writer, [lesson("Rotate keys on Mondays", 0.9)])
    [foreign] = await WriteService(deps).write(theirs.writer, [lesson("Rotate keys on Fridays", 0.9)])
    with pytest.raises(MemplaneError) as refused:
        await MemoriesService(deps).feedback(
            mine.writer, [str(own.id), str(foreign.id)], False, "", task_id="t", outcome="failure")
    assert refused.value.reason == "MEMORY_NOT_FOUND"
    assert (await MemoriesService(deps).get(mine.writer, str(own.id))).confidence == pytest.approx(0.9)
    assert (await MemoriesService(deps).get(theirs.writer, str(foreign.id))).confidence == pytest.approx(0.9)
