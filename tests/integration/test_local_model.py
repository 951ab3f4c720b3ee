"""The real-model tier: the packaged local model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, installed by
scripts/install_local_model.py) served by llama.cpp's server as the embedded default runs it, and
called through the production path (litellm, the stage's schema, the structured-fact store).
The fake server of tests/support/fake_llm.py keeps covering errors and timeouts."""
from __future__ import annotations

from dataclasses import replace

import pytest

from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Status
from memplane_server.core.reflection.faithfulness import why_dropped
from memplane_server.core.reflection.reflection import ReflectInput, Task, TaskStep
from memplane_server.embedded.model import LITELLM_MODEL, EmbeddedModel
from memplane_server.llm import extraction
from memplane_server.llm.chat import ChatModel
from memplane_server.services.memories import MemoriesService
from memplane_server.services.reflection import reflect
from memplane_server.services.reflection.foresight import ForesightService
from memplane_server.services.search.service import SearchService
from memplane_server.services.write.service import WriteService
from tests.conftest import make_shared_tmpdir
from tests.support.local_model import installed_model
from tests.support.services import reflect_service, write_intake

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def local_model():
    model = EmbeddedModel(make_shared_tmpdir("memplane-model-"), installed_model(), threads=2)
    with model:
        yield model


@pytest.fixture
def model_deps(deps, local_model):
    chat = ChatModel(LITELLM_MODEL, api_base=local_model.api_base, api_key=local_model.api_key, timeout=220,
                     structured_output="json_object_schema")
    return replace(deps, llm=chat)


def turn(text: str) -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.TURN, content=text,
                       session_id="chat", user_id="u1")


async def facts(deps, caller, **filters) -> list:
    records, _ = await MemoriesService(deps).list(caller, MemoryFilter(kinds=(Kind.FACT, Kind.PREFERENCE), **filters),
                                                  100, "")
    return records


async def test_a_moved_users_city_is_superseded_by_the_new_one(model_deps, make_tenant):
    world = await make_tenant()
    write = write_intake(model_deps)
    await write.accept(world.writer, [turn("I live in Berlin.")], "sync")
    [berlin] = [f for f in await facts(model_deps, world.writer) if "berlin" in (f.value or "").lower()]
    accepted = await write.accept(world.writer, [turn("I just moved to Paris, so I live in Paris now.")], "sync")
    assert accepted.operation is None, "the model answered in the schema"
    current = [f for f in await facts(model_deps, world.writer, entity=berlin.entity, attribute=berlin.attribute)]
    assert [f.value.lower() for f in current] == ["paris"]
    old = await MemoriesService(model_deps).get(world.writer, str(berlin.id))
    assert old.status is Status.SUPERSEDED


async def test_a_lesson_reflected_from_a_retried_task_is_foreseen_for_a_similar_task(model_deps, make_tenant,
                                                                                    monkeypatch):
    judged = []  # what the model proposed and what became of it, for the failure's message

    def judge(*args):
        judged.append((args[1], args[2], why := why_dropped(*args)))
        return why

    monkeypatch.setattr(reflect, "why_dropped", judge)
    world = await make_tenant()
    write = WriteService(model_deps)
    await write.write(world.writer, [  # lessons of other work, for the new one to be found among
        MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.LESSON, content=text)
        for text in ("Book refundable fares when the trip dates may change.",
                     "Drain the job queue before rotating the database credentials.",
                     "Ask for the invoice number before refunding a payment.")])
    task = Task("export-1", "Export the monthly sales report to the finance share", (
        TaskStep("export_report --month 2026-11 --to /mnt/finance",
                 "error: permission denied: /mnt/finance is mounted read-only"),
        TaskStep("mount -o remount,rw /mnt/finance", "ok"),
        TaskStep("export_report --month 2026-11 --to /mnt/finance", "wrote /mnt/finance/sales-2026-11.csv"),
    ), "success", attempts=2)
    outcome = await reflect_service(model_deps).run(world.writer, ReflectInput(task=task))
    learned = [m for m in outcome.memories if m.kind is Kind.LESSON]
    assert outcome.used_llm and learned, judged
    advice = await ForesightService(SearchService(model_deps)).foresee(
        world.writer, "Export the quarterly sales report to the finance share", entities=[], tools=["export_report"],
        top_k=3, f=MemoryFilter())
    assert {m.id for m in learned} & {a.hit.memory.id for a in advice[:3]}, ([a.hit.memory.content for a in advice],
                                                                               judged)


async def test_an_answer_cut_short_degrades_extraction_and_stores_no_part_of_it(model_deps, make_tenant, monkeypatch):
    # A bound of 4 tokens cuts the real model's JSON short, twice (even {"operations": []} takes more;
    # at 12 it answered that): the malformed answer a model looping inside the schema gives.
    monkeypatch.setattr(extraction, "EXPECTED", replace(extraction.EXPECTED, max_tokens=4))
    world = await make_tenant()
    accepted = await write_intake(model_deps).accept(world.writer, [turn("I live in Berlin and I work as a baker.")], "sync")
    assert [r.content for r in accepted.records] == ["I live in Berlin and I work as a baker."]
    assert accepted.operation is None and accepted.extracted == []
    assert "LLM_MALFORMED_OUTPUT" in accepted.extraction_degraded
    assert await facts(model_deps, world.writer) == []
