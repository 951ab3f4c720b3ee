"""Consolidation: a dry run reports the clusters of similar lessons; with a model each cluster
becomes one more general memory linked to its sources, which stay and rank below it until it
leaves service; without a model writing is refused with a reason."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from memplane_server.core.errors import MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, Status
from memplane_server.llm.chat import ChatModel
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.reflection.consolidate import ConsolidateService
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.service import WriteService
from tests.support.fake_llm import Reply
from tests.support.jobs import run_jobs_until
from tests.support.services import job_runner

pytestmark = pytest.mark.asyncio(loop_scope="session")

LESSONS = [
    "Drain the job queue before rotating the deploy keys",
    "Always empty the queue first when you rotate keys",
    "Run the database migrations before deploying the API",
]


@pytest.fixture
def llm_deps(deps, fake_llm):
    return replace(deps, llm=ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="test", timeout=5))


async def lessons(deps, caller) -> list:
    return await WriteService(deps).write(caller, [
        MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.LESSON, content=c) for c in LESSONS])


async def test_a_dry_run_reports_the_similar_lessons_and_writes_nothing(deps, make_tenant):
    world, other = await make_tenant(), await make_tenant()
    written = await lessons(deps, world.writer)
    await lessons(deps, other.writer)
    [cluster] = (await ConsolidateService(deps, WriteService(deps)).consolidate(
        world.writer, scope=None, domain=None, dry_run=True)).clusters
    assert {m.id for m in cluster.members} == {written[0].id, written[1].id} and cluster.consolidated is None


async def test_without_a_model_writing_a_consolidation_is_refused_with_a_reason(deps, make_tenant):
    world = await make_tenant()
    with pytest.raises(MemplaneError) as refused:
        await ConsolidateService(deps, WriteService(deps)).consolidate(world.writer, scope=None, domain=None,
                                                                       dry_run=False)
    assert refused.value.reason == "LLM_NOT_CONFIGURED"


async def test_the_general_memory_stands_for_its_sources_which_rank_below_it(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    written = await lessons(llm_deps, world.writer)
    fake_llm.script(Reply(json.dumps({"content": "Stop and drain queued jobs before any key rotation",
                                      "context": "key rotation", "confidence": 0.9})))
    [cluster] = (await ConsolidateService(llm_deps, WriteService(llm_deps)).consolidate(
        world.writer, scope=None, domain=None, dry_run=False)).clusters
    general = cluster.consolidated
    assert (general.kind, general.source_type, general.context) == (Kind.LESSON, "consolidation", "key rotation")
    sources = [await MemoriesService(llm_deps).get(world.writer, str(m.id)) for m in written[:2]]
    assert [(s.consolidated_into, s.status) for s in sources] == [(general.id, Status.ACTIVE)] * 2
    hits = await SearchService(llm_deps).search(world.writer, SearchQuery("rotating keys: what first?", explain=True))
    order = [h.memory.id for h in hits]
    assert all(order.index(general.id) < order.index(s.id) for s in sources)
    factor = next(c for c in hits[order.index(sources[0].id)].explanation if c.name == "consolidated")
    assert factor.value == 0.8 and str(general.id) in factor.detail


async def test_forgetting_the_general_memory_gives_its_sources_back_their_rank(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    written = await lessons(llm_deps, world.writer)
    fake_llm.script(Reply(json.dumps({"content": "Drain queued jobs before key rotation", "confidence": 0.9})))
    [cluster] = (await ConsolidateService(llm_deps, WriteService(llm_deps)).consolidate(
        world.writer, scope=None, domain=None, dry_run=False)).clusters
    await ForgetService(llm_deps).forget(world.writer, ids=[str(cluster.consolidated.id)], f=None, hard=False,
                                         dry_run=False, reason="")
    source = await MemoriesService(llm_deps).get(world.writer, str(written[0].id))
    assert source.consolidated_into is None


async def test_the_schedule_queues_one_consolidation_per_changed_tenant_per_period(deps, make_tenant):
    world, quiet = await make_tenant(), await make_tenant()
    await lessons(deps, world.writer)
    await deps.jobs.pool.execute(
        "UPDATE jobs SET state = 'cancelled' WHERE type = 'consolidate' AND state IN ('pending', 'running')")
    await deps.jobs.schedule_consolidations(3600)
    await deps.jobs.schedule_consolidations(3600)  # another worker, same period: nothing more
    queued = await deps.jobs.pool.fetch(
        "SELECT tenant_id FROM jobs WHERE type = 'consolidate' AND tenant_id = ANY($1)", [world.tenant_id, quiet.tenant_id])
    assert [r["tenant_id"] for r in queued] == [world.tenant_id]


async def test_a_scheduled_consolidation_without_a_model_reports_the_clusters(deps, make_tenant):
    world = await make_tenant()
    await lessons(deps, world.writer)
    await deps.jobs.pool.execute(
        "UPDATE jobs SET state = 'cancelled' WHERE type = 'consolidate' AND state IN ('pending', 'running')")
    await deps.jobs.schedule_consolidations(3600)
    job_id = await deps.jobs.pool.fetchval(
        "SELECT id FROM jobs WHERE type = 'consolidate' AND tenant_id = $1", world.tenant_id)
    done = await run_jobs_until(job_runner(deps), deps, world.writer, job_id, lambda v: v.state == "succeeded")
    assert done.result_summary == "1 clusters of similar lessons or procedures, 0 consolidated"


async def test_an_agent_never_clusters_another_agents_private_lessons(deps, make_tenant):
    world = await make_tenant()
    await lessons(deps, world.agent1)  # private to a1
    consolidate = ConsolidateService(deps, WriteService(deps)).consolidate
    assert (await consolidate(world.agent2, scope=None, domain=None, dry_run=True)).clusters == []
    mine = await lessons(deps, world.agent2)
    [cluster] = (await consolidate(world.agent2, scope=None, domain=None, dry_run=True)).clusters
    assert {m.id for m in cluster.members} == {mine[0].id, mine[1].id}


async def test_a_read_only_key_may_not_consolidate(deps, make_tenant):
    world = await make_tenant()
    await lessons(deps, world.writer)
    with pytest.raises(MemplaneError) as refused:
        await ConsolidateService(deps, WriteService(deps)).consolidate(world.reader, scope=None, domain=None,
                                                                       dry_run=True)
    assert refused.value.code.name == "PERMISSION_DENIED"
