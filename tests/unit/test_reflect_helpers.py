"""Pure helpers of the reflect use case: summaries, transcripts and job (de)serialisation."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from uuid import uuid4

import pytest

from memplane_server.core.access.caller import Caller, Role, caller_from_json, caller_to_json
from memplane_server.core.model import Kind, Layer, MemoryRecord, Scope, Status
from memplane_server.core.reflection.reflection import (
    ReflectInput,
    Task,
    TaskStep,
    input_from_json,
    input_to_json,
    session_summary,
)
from memplane_server.core.reflection.transcript import language_line


def record(kind: Kind, content: str, entity: str | None = None, attribute: str | None = None,
           value: str | None = None) -> MemoryRecord:
    now = datetime(2024, 1, 1, tzinfo=timezone.utc)
    return MemoryRecord(
        id=uuid4(), tenant_id="acme", scope=Scope.GLOBAL, domain=None, agent_id=None, user_id="u1",
        session_id="s1", layer=Layer.SEMANTIC, kind=kind, content=content, context="", entity=entity,
        attribute=attribute, value=value, tags=[], metadata={}, confidence=1.0, status=Status.ACTIVE,
        supersedes=None, source_type=None, source_id=None, occurred_at=now, valid_from=None, valid_to=None,
        created_at=now, updated_at=now,
    )


def test_session_summary_without_facts_says_so():
    text = session_summary("s1", [record(Kind.TURN, "hello")]).text
    assert text == "Session s1: 1 active memories.\nNo facts or preferences recorded yet."


def test_session_summary_lists_structured_facts_sorted_by_entity_and_attribute():
    text = session_summary("s1", [
        record(Kind.FACT, "lives in Lyon", entity="user", attribute="city", value="Lyon"),
        record(Kind.PREFERENCE, "likes tea", entity="user", attribute="drink", value="tea"),
        record(Kind.FACT, "acme is a company", entity="acme"),
    ]).text
    assert text.splitlines() == [
        "Session s1: 3 active memories.",
        "- acme = acme is a company",
        "- user.city = Lyon",
        "- user.drink = tea",
    ]


def test_session_summary_keeps_the_last_record_of_a_repeated_entity_attribute():
    text = session_summary("s1", [
        record(Kind.FACT, "lives in Paris", entity="user", attribute="city", value="Paris"),
        record(Kind.FACT, "lives in Lyon", entity="user", attribute="city", value="Lyon"),
    ]).text
    assert "- user.city = Lyon" in text
    assert "Paris" not in text


def test_session_summary_lists_unstructured_facts_with_their_kind_and_ignores_other_kinds():
    text = session_summary("s1", [record(Kind.PREFERENCE, "likes jazz"), record(Kind.EVENT, "booked a flight")]).text
    assert text.splitlines() == ["Session s1: 2 active memories.", "- preference: likes jazz"]


def test_session_summary_names_as_sources_exactly_the_facts_it_states():
    city = record(Kind.FACT, "lives in Lyon", entity="user", attribute="city", value="Lyon")
    turn = record(Kind.TURN, "I moved to Lyon")
    assert session_summary("s1", [turn, city]).sources == (city.id,)


def test_session_summary_stays_within_200_characters_and_counts_what_it_left_out():
    facts = [record(Kind.FACT, f"fact {n}", entity="user", attribute=f"attribute_{n:02}", value="x" * 20)
             for n in range(30)]
    summary = session_summary("s1", facts)
    assert len(summary.text) <= 200
    assert summary.text.endswith(f"- (+{30 - len(summary.sources)} more)") and 0 < len(summary.sources) < 30


def test_session_summary_shortens_one_long_fact_rather_than_leave_it_out():
    summary = session_summary("s1", [record(Kind.PREFERENCE, "likes " + "very " * 80 + "long walks")])
    assert len(summary.text) <= 200 and summary.text.endswith("…") and len(summary.sources) == 1


def _via_json(data: dict) -> dict:
    return json.loads(json.dumps(data))  # what the jobs table stores


def test_task_input_roundtrips_through_json():
    when = datetime(2024, 5, 1, 12, 30, tzinfo=timezone(timedelta(hours=8)))
    original = ReflectInput(
        task=Task("t1", "book", (TaskStep("search", "ok", when), TaskStep("pay")), "partial", "slow"),
        user_id="u1", scope=Scope.DOMAIN, domain="travel", mode="async",
    )
    restored = input_from_json(_via_json(input_to_json(original)))
    assert restored == original
    assert restored.task.steps[0].occurred_at.utcoffset() == timedelta(hours=8)


def test_session_input_roundtrips_through_json():
    original = ReflectInput(session_id="s1", user_id=None, scope=None, mode="sync")
    assert input_from_json(_via_json(input_to_json(original))) == original


def test_caller_roundtrips_through_json():
    original = Caller("k1", Role.AGENT, "acme", "bot", {"travel": True, "finance": False})
    restored = caller_from_json(_via_json(caller_to_json(original)))
    assert restored == original
    assert restored.role is Role.AGENT


def test_caller_without_tenant_or_agent_roundtrips_through_json():
    original = Caller("k2", Role.PLATFORM_ADMIN, None, None, {})
    assert caller_from_json(_via_json(caller_to_json(original))) == original


@pytest.mark.parametrize(("text", "language"), [
    ("每天早上 8 点给用户推送打卡提醒。", "Chinese"),
    ("把 values-prod.yaml 里的 db.host 改对，再用 helm 升级", "Chinese"),
    ("明日の午前中に集荷を予約してください", "Japanese"),
    ("내일 오전에 택배 수거를 예약해 주세요", "Korean"),
])
def test_a_request_written_in_chinese_japanese_or_korean_asks_for_memories_in_its_language(text, language):
    assert language_line(text) == f"Write every memory and the summary in {language}, the language of the request."


@pytest.mark.parametrize("text", ["Deploy payments-api 2.3.0 to production", "Book the 上海 office for Friday's review", ""])
def test_a_request_written_mostly_in_latin_letters_asks_for_no_language(text):
    assert language_line(text) == ""
