"""LLM extraction on Write, through litellm against a local OpenAI-compatible server: operations
on structured facts, references resolved with known facts in the prompt, failures that lose nothing."""
from __future__ import annotations

import asyncio
import json
import re
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter, Status
from memplane_server.llm.chat import ChatModel
from memplane_server.services.content.admin import ContentPolicyService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.search.service import SearchQuery, SearchService
from tests.support.fake_llm import Reply
from tests.support.jobs import run_jobs_until
from tests.support.services import job_runner, write_intake

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture
def llm_deps(deps, fake_llm):
    return replace(deps, llm=ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="k", timeout=2))


def turn(text: str, session: str = "chat") -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.TURN, content=text,
                       session_id=session, user_id="u1")


def new_turn_id(body: dict) -> str:
    """The label the prompt gives the first new turn."""
    prompt = body["messages"][1]["content"]
    return re.findall(r"\[(n\d+)\]", prompt.split("NEW TURNS:")[1])[0]


def new_turn_text(body: dict) -> str:
    prompt = body["messages"][1]["content"]
    return re.findall(r"\[n\d+\] (.*)", prompt.split("NEW TURNS:")[1])[0]


def answer(op: str, value: str, old: str = "") -> Reply:
    def build(body: dict) -> str:
        return json.dumps({"operations": [{
            "op": op, "kind": "fact", "entity": "user", "attribute": "address", "value": value, "old_value": old,
            "content": f"The user's address is {value}", "confidence": 0.95, "source_turn": new_turn_id(body),
            "evidence": new_turn_text(body)}]})
    return Reply(build)


async def write_turn(deps, caller, text: str, mode: str = "sync", time_zone: str | None = None):
    """(stored turns, extracted memories, operation)"""
    accepted = await write_intake(deps).accept(caller, [turn(text)], mode, time_zone)
    return accepted.records, accepted.extracted, accepted.operation


async def test_extraction_sends_its_schema_and_a_bound_on_the_answer(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(answer("ADD", "Beijing Chaoyang"))
    await write_turn(llm_deps, world.writer, "my address is Beijing Chaoyang")
    [body] = [r["body"] for r in fake_llm.requests if r["path"].endswith("/chat/completions")][-1:]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "operations"
    assert body["response_format"]["json_schema"]["schema"]["properties"]["operations"]["maxItems"] == 30
    assert body["max_tokens"] == 2048


async def test_the_address_scenario(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(answer("ADD", "Beijing Chaoyang"))
    await write_turn(llm_deps, world.writer, "my address is Beijing Chaoyang")
    fake_llm.script(answer("UPDATE", "Shenzhen Nanshan", "Beijing Chaoyang"))
    _, extracted, _ = await write_turn(llm_deps, world.writer, "change it to Shenzhen Nanshan")
    assert [m.value for m in extracted] == ["Shenzhen Nanshan"]
    second_prompt = fake_llm.requests[-1]["body"]["messages"][1]["content"]
    assert "address = Beijing Chaoyang" in second_prompt and "my address is Beijing Chaoyang" in second_prompt
    between = datetime.now(timezone.utc)
    await asyncio.sleep(0.01)
    fake_llm.script(answer("UPDATE", "Shanghai", "Shenzhen Nanshan"))
    await write_turn(llm_deps, world.writer, "no, back to Shanghai")

    current, _ = await MemoriesService(llm_deps).list(world.writer, MemoryFilter(entity="user", attribute="address"), 10, "")
    assert [m.value for m in current] == ["Shanghai"]
    history, _ = await MemoriesService(llm_deps).history(world.writer, memory_id=None, entity="user",
                                                        attribute="address", page_size=50, page_token="")
    created = [(e.snapshot.value, e.changed_at) for e in history if e.action == "created"]
    assert [v for v, _ in created] == ["Shanghai", "Shenzhen Nanshan", "Beijing Chaoyang"]
    then = await SearchService(llm_deps).search(
        world.writer, SearchQuery("user address", filter=MemoryFilter(entity="user", attribute="address"), as_of=between))
    assert [h.memory.value for h in then] == ["Shenzhen Nanshan"]
    turns, _ = await MemoriesService(llm_deps).list(world.writer, MemoryFilter(kinds=(Kind.TURN,)), 10, "")
    assert len(turns) == 3  # the raw turns are kept too
    sent = fake_llm.requests[0]["body"]
    assert sent["temperature"] == 0 and sent["top_p"] == 0.9


async def test_small_talk_stores_no_fact(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply(json.dumps({"operations": [{"op": "NOOP"}]})))
    records, extracted, op = await write_turn(llm_deps, world.writer, "haha nice weather today")
    assert len(records) == 1 and extracted == [] and op is None
    facts, _ = await MemoriesService(llm_deps).list(world.writer, MemoryFilter(kinds=(Kind.FACT,)), 10, "")
    assert facts == []


async def test_delete_operation_retires_the_fact(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(answer("ADD", "Berlin"))
    await write_turn(llm_deps, world.writer, "I live in Berlin")
    fake_llm.script(answer("DELETE", "", "Berlin"))
    await write_turn(llm_deps, world.writer, "forget that I live in Berlin, I moved out")
    current, _ = await MemoriesService(llm_deps).list(world.writer, MemoryFilter(entity="user"), 10, "")
    assert current == []
    deleted, _ = await MemoriesService(llm_deps).list(
        world.writer, MemoryFilter(entity="user", statuses=(Status.DELETED,)), 10, "")
    assert [m.value for m in deleted] == ["Berlin"]


async def test_malformed_output_is_retried_once(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply('{"operations": [{"op": "ADD", "entity": "user"}]}'), answer("ADD", "Paris"))
    _, extracted, _ = await write_turn(llm_deps, world.writer, "I live in Paris")
    assert [m.value for m in extracted] == ["Paris"] and len(fake_llm.requests) == 2
    assert "invalid" in fake_llm.requests[1]["body"]["messages"][-1]["content"]


@pytest.mark.parametrize("failure", [
    [Reply("provider error", status=500)],
    [Reply("slow", delay=3.0)],
], ids=["provider error", "timeout"])
async def test_a_failed_extraction_keeps_the_turn_and_leaves_a_job_that_retries(llm_deps, fake_llm, make_tenant, failure):
    world = await make_tenant()
    fake_llm.script(*failure)
    records, extracted, op = await write_turn(llm_deps, world.writer, "I live in Rome")
    assert len(records) == 1 and extracted == [] and op is not None and op.state == "pending"
    assert (await MemoriesService(llm_deps).get(world.writer, str(records[0].id))).content == "I live in Rome"
    fake_llm.replies.clear()
    fake_llm.script(answer("ADD", "Rome"))
    done = await run_jobs_until(job_runner(llm_deps), llm_deps, world.writer, op.id, lambda v: v.state == "succeeded")
    assert len(done.result_memory_ids) == 1


async def test_a_model_that_answers_malformed_twice_leaves_the_turn_stored_no_fact_and_says_so(
        llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply("not json"), Reply('{"operations": [{"op": "ADD", "entity": "user", "attribute": "city"'))
    accepted = await write_intake(llm_deps).accept(world.writer, [turn("I live in Rome")], "sync")
    assert [r.content for r in accepted.records] == ["I live in Rome"] and accepted.extracted == []
    assert accepted.operation is None, "asked again at temperature 0 the model answers the same: no job retries it"
    assert "LLM_MALFORMED_OUTPUT" in accepted.extraction_degraded and "turns are stored" in accepted.extraction_degraded
    facts, _ = await MemoriesService(llm_deps).list(world.writer, MemoryFilter(kinds=(Kind.FACT, Kind.PREFERENCE)), 10, "")
    assert facts == [] and len(fake_llm.requests) == 2


async def test_an_extraction_job_whose_model_answers_malformed_twice_succeeds_saying_so(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    _, _, op = await write_turn(llm_deps, world.writer, "I live in Oslo", mode="async")
    fake_llm.script(Reply("not json"), Reply("not json either"))
    done = await run_jobs_until(job_runner(llm_deps), llm_deps, world.writer, op.id, lambda v: v.state == "succeeded")
    assert done.result_memory_ids == () and "went without the model" in done.result_summary
    assert len(fake_llm.requests) == 2


async def test_async_infer_returns_at_once_with_an_operation(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    records, extracted, op = await write_turn(llm_deps, world.writer, "I live in Oslo", mode="async")
    assert len(records) == 1 and extracted == [] and op is not None
    assert fake_llm.requests == []


@pytest.mark.parametrize("turn_text, value, evidence", [
    ("hi, how are you today?", "Shenzhen", "hi, how are you today?"),
    ("I live in Berlin", "Berlin", "I live in Paris"),
    ("I live in Berlin", "Berlin", ""),
])
async def test_a_claim_not_grounded_in_its_turn_is_dropped(llm_deps, fake_llm, make_tenant, turn_text, value, evidence):
    world = await make_tenant()
    fake_llm.script(Reply(lambda body: json.dumps({"operations": [{
        "op": "ADD", "kind": "fact", "entity": "user", "attribute": "city", "value": value,
        "content": f"The user lives in {value}", "confidence": 0.95, "source_turn": new_turn_id(body),
        "evidence": evidence}]})))
    records, extracted, operation = await write_turn(llm_deps, world.writer, turn_text)
    assert extracted == [] and operation is None and len(records) == 1


async def test_a_claim_quoting_an_earlier_turn_is_dropped(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply(json.dumps({"operations": []})))
    await write_turn(llm_deps, world.writer, "I live in Berlin")
    fake_llm.script(Reply(json.dumps({"operations": [{
        "op": "ADD", "kind": "fact", "entity": "user", "attribute": "city", "value": "Berlin",
        "content": "The user lives in Berlin", "confidence": 0.95, "source_turn": "e1", "evidence": "I live in Berlin"}]})))
    _, extracted, _ = await write_turn(llm_deps, world.writer, "Thanks!")
    assert extracted == []


async def test_a_claim_naming_no_turn_stands_on_the_new_turn_its_evidence_quotes(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply(json.dumps({"operations": [{
        "op": "ADD", "kind": "fact", "entity": "user", "attribute": "city", "value": "Berlin",
        "content": "The user lives in Berlin", "confidence": 0.95, "source_turn": "3f2a-garbled", "evidence": "I live in Berlin"}]})))
    [stored], [fact], _ = await write_turn(llm_deps, world.writer, "I live in Berlin")
    assert fact.source_id == str(stored.id)


async def test_a_date_resolved_from_relative_words_is_kept(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(Reply(lambda body: json.dumps({"operations": [{
        "op": "ADD", "kind": "fact", "entity": "user", "attribute": "flight_date", "value": "2026-12-08",
        "content": "The user flies on 2026-12-08", "confidence": 0.9, "source_turn": new_turn_id(body),
        "evidence": "I fly tomorrow"}]})))
    _, [fact], _ = await write_turn(llm_deps, world.writer, "I fly tomorrow")
    assert fact.value == "2026-12-08"


async def test_the_model_is_shown_only_the_known_facts_of_the_turns_user(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(answer("ADD", "Hangzhou"))
    await write_turn(llm_deps, world.writer, "I live in Hangzhou")
    fake_llm.script(Reply(json.dumps({"operations": []})))
    other = replace(turn("I like tea", session="other"), user_id="u2")
    await write_intake(llm_deps).accept(world.writer, [other], "sync")
    prompt = fake_llm.requests[-1]["body"]["messages"][1]["content"]
    assert "Hangzhou" not in prompt.split("NEW TURNS:")[0]


async def test_the_prompt_renders_times_in_the_callers_zone(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(answer("ADD", "Hangzhou"))
    await write_turn(llm_deps, world.writer, "I live in Hangzhou", time_zone="Asia/Shanghai")
    fake_llm.script(Reply(json.dumps({"operations": [{"op": "NOOP"}]})))
    await write_turn(llm_deps, world.writer, "still in Hangzhou", time_zone="Asia/Shanghai")
    prompt = fake_llm.requests[-1]["body"]["messages"][1]["content"]
    assert prompt.startswith("NOW: ") and " CST" in prompt.splitlines()[0]
    assert re.search(r"\[updated \d{4}-\d\d-\d\d \d\d:\d\d CST\] user\.address = Hangzhou", prompt)


async def test_what_the_model_extracts_passes_the_content_policy_and_a_refusal_becomes_a_redaction(
        llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    await ContentPolicyService(llm_deps).set(
        Caller(key_id="admin", role=Role.TENANT_ADMIN, tenant_id=world.tenant_id, agent_id=None), "", "",
        {"email": "refuse"})
    # The turn spells the address out, which the detector does not read as one; the model writes it as one.
    fake_llm.script(Reply(lambda body: json.dumps({"operations": [{
        "op": "ADD", "kind": "fact", "entity": "user", "attribute": "email", "value": "li.wei@example.cn",
        "content": "The user's e-mail is li.wei@example.cn", "confidence": 0.95, "source_turn": new_turn_id(body),
        "evidence": "li.wei at example dot cn"}]})))

    _, [fact], _ = await write_turn(llm_deps, world.writer, "you can write to me at li.wei at example dot cn")

    assert (fact.content, fact.value) == ("The user's e-mail is [REDACTED:email]", "[REDACTED:email]")


def claim(op: str, attribute: str, value: str, old: str = "") -> Reply:
    def build(body: dict) -> str:
        return json.dumps({"operations": [{
            "op": op, "kind": "fact", "entity": "user", "attribute": attribute, "value": value, "old_value": old,
            "content": f"The user's {attribute} is {value}", "confidence": 0.95, "source_turn": new_turn_id(body),
            "evidence": new_turn_text(body)}]})
    return Reply(build)


async def test_a_delete_retires_the_turns_users_fact_and_not_another_users(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(answer("ADD", "Berlin"))
    await write_turn(llm_deps, world.writer, "I live in Berlin")
    fake_llm.script(answer("ADD", "Berlin"))
    await write_intake(llm_deps).accept(world.writer, [replace(turn("I live in Berlin too"), user_id="u2")], "sync")
    fake_llm.script(answer("DELETE", "", "Berlin"))
    await write_turn(llm_deps, world.writer, "forget that I live in Berlin, I moved out")
    left, _ = await MemoriesService(llm_deps).list(world.writer, MemoryFilter(entity="user", kinds=(Kind.FACT,)), 10, "")
    assert [(m.user_id, m.value) for m in left] == [("u2", "Berlin")]


async def test_a_delete_of_a_fact_nobody_knows_is_dropped(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(answer("ADD", "Berlin"))
    await write_turn(llm_deps, world.writer, "I live in Berlin")
    fake_llm.script(claim("DELETE", "pet", ""))
    await write_turn(llm_deps, world.writer, "no more pets for me")
    left, _ = await MemoriesService(llm_deps).list(world.writer, MemoryFilter(entity="user"), 10, "")
    assert [m.value for m in left] == ["Berlin"]


async def test_an_update_under_new_names_whose_old_value_is_one_known_fact_supersedes_it(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(claim("ADD", "job", "nurse"))
    await write_turn(llm_deps, world.writer, "I am a nurse")
    fake_llm.script(claim("UPDATE", "occupation", "teacher", old="Nurse"))
    _, [teacher], _ = await write_turn(llm_deps, world.writer, "I quit and now I am a teacher")
    assert (teacher.attribute, teacher.value) == ("job", "teacher")
    current, _ = await MemoriesService(llm_deps).list(world.writer, MemoryFilter(entity="user", kinds=(Kind.FACT,)), 10, "")
    assert [m.value for m in current] == ["teacher"]


async def test_a_turn_that_says_nothing_of_a_known_fact_does_not_observe_it_again(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(answer("ADD", "Berlin"))
    await write_turn(llm_deps, world.writer, "I live in Berlin")
    fake_llm.script(Reply(lambda body: json.dumps({"operations": [{
        "op": "UPDATE", "kind": "fact", "entity": "user", "attribute": "address", "value": "Berlin", "old_value": "Berlin",
        "content": "The user's address is Berlin", "confidence": 1.0, "source_turn": new_turn_id(body),
        "evidence": "Thanks."}]})))
    _, extracted, _ = await write_turn(llm_deps, world.writer, "Thanks.")
    assert extracted == []


async def test_a_delete_goes_to_the_known_fact_holding_the_old_value_it_names(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(claim("ADD", "pet_name", "Rex"))
    await write_turn(llm_deps, world.writer, "I have a dog named Rex")
    fake_llm.script(claim("ADD", "dog", "the park"))
    await write_turn(llm_deps, world.writer, "He loves the park")
    fake_llm.script(claim("DELETE", "dog", "", old="Rex"))
    await write_turn(llm_deps, world.writer, "I no longer have Rex")
    left, _ = await MemoriesService(llm_deps).list(world.writer, MemoryFilter(entity="user", kinds=(Kind.FACT,)), 10, "")
    assert [m.value for m in left] == ["the park"]


async def test_a_delete_whose_evidence_does_not_name_the_value_is_dropped(llm_deps, fake_llm, make_tenant):
    world = await make_tenant()
    fake_llm.script(claim("ADD", "diet", "vegetarian"))
    await write_turn(llm_deps, world.writer, "I'm vegetarian now")
    fake_llm.script(claim("DELETE", "diet", "", old="vegetarian"))
    await write_turn(llm_deps, world.writer, "What should I cook tonight?")
    left, _ = await MemoriesService(llm_deps).list(world.writer, MemoryFilter(entity="user"), 10, "")
    assert [m.value for m in left] == ["vegetarian"]
