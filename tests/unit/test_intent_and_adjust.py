from datetime import datetime, timedelta, timezone

import pytest

from memplane_server.core.model import Kind, Layer, MemoryRecord, Scope, Status
from memplane_server.core.retrieval.adjust import OUT_OF_TIME, confidence_weight, kind_bonus, recency, valid_time_weight
from memplane_server.core.retrieval.intent import Intent, detect_intent, routed_weights
from memplane_server.core.retrieval.time_expressions import TimeRange


@pytest.mark.parametrize("query, intent", [
    ("How do I rotate the API keys?", Intent.HOW_TO),
    ("what should we do when the deploy fails", Intent.HOW_TO),
    ("怎么重置密码", Intent.HOW_TO),
    ("What is the user's address?", Intent.FACT),
    ("What was my city in 2022?", Intent.FACT),
    ("用户的地址是什么", Intent.FACT),
    ("Did I ever change my address?", Intent.HISTORY),
    ("我以前住在哪里", Intent.HISTORY),
    ("where are we with the migration", Intent.STATE),
    ("项目进展", Intent.STATE),
    ("Caroline LGBTQ support group", Intent.NONE),
])
def test_intent_is_told_from_wording(query, intent):
    assert detect_intent(query) is intent


def test_kind_bonus_applies_only_to_the_kinds_that_answer():
    assert kind_bonus(Intent.HOW_TO, Kind.PROCEDURE) == pytest.approx(1.3)
    assert kind_bonus(Intent.HOW_TO, Kind.FACT) == 1.0
    assert kind_bonus(Intent.NONE, Kind.FACT) == 1.0


def record(kind: Kind, occurred: datetime, confidence: float = 1.0) -> MemoryRecord:
    return MemoryRecord(id="x", tenant_id="t", scope=Scope.GLOBAL, domain=None, agent_id=None, user_id=None,
                        session_id=None, layer=Layer.EPISODIC, kind=kind, content="c", context="", entity=None,
                        attribute=None, value=None, tags=[], metadata={}, confidence=confidence, status=Status.ACTIVE,
                        supersedes=None, source_type=None, source_id=None, occurred_at=occurred, valid_from=None,
                        valid_to=None, created_at=occurred, updated_at=occurred)


def test_recency_decays_exponentially_with_age():
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert recency(record(Kind.EVENT, now - timedelta(days=100)), now, {"event": 0.01}) == pytest.approx(0.3679, 1e-3)


def test_recency_is_neutral_without_a_rate_for_the_kind():
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert recency(record(Kind.FACT, now - timedelta(days=1000)), now, {"event": 0.01}) == 1.0


def test_confidence_weight_halves_a_memory_nobody_believes():
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert confidence_weight(record(Kind.FACT, now, 0.0)) == 0.5
    assert confidence_weight(record(Kind.FACT, now, 1.0)) == 1.0


YEAR_2022 = TimeRange(datetime(2022, 1, 1, tzinfo=timezone.utc), datetime(2023, 1, 1, tzinfo=timezone.utc), "in 2022")


def city(valid_from: datetime, valid_to: datetime | None = None) -> MemoryRecord:
    base = record(Kind.FACT, valid_from)
    return MemoryRecord(**{**base.__dict__, "entity": "user", "attribute": "city", "valid_from": valid_from,
                           "valid_to": valid_to})


def test_a_fact_valid_during_the_asked_time_keeps_its_score():
    held = city(datetime(2021, 1, 1, tzinfo=timezone.utc), datetime(2023, 3, 1, tzinfo=timezone.utc))
    assert valid_time_weight(held, YEAR_2022) == 1.0


def test_a_fact_that_began_after_the_asked_time_is_weighed_down():
    assert valid_time_weight(city(datetime(2023, 3, 1, tzinfo=timezone.utc)), YEAR_2022) == OUT_OF_TIME


def test_a_fact_that_ended_before_the_asked_time_is_weighed_down():
    ended = city(datetime(2019, 1, 1, tzinfo=timezone.utc), datetime(2021, 6, 1, tzinfo=timezone.utc))
    assert valid_time_weight(ended, YEAR_2022) == OUT_OF_TIME


def test_valid_time_leaves_unstructured_memories_and_timeless_queries_alone():
    assert valid_time_weight(record(Kind.EVENT, datetime(2030, 1, 1, tzinfo=timezone.utc)), YEAR_2022) == 1.0
    assert valid_time_weight(city(datetime(2023, 3, 1, tzinfo=timezone.utc)), None) == 1.0


def test_routing_raises_the_exact_channel_for_fact_questions():
    weights = routed_weights(Intent.FACT, {"vector": 1.0, "exact": 1.5})
    assert weights == {"vector": 1.0, "exact": 3.0}


def test_routing_leaves_weights_alone_without_an_intent():
    assert routed_weights(Intent.NONE, {"vector": 1.0, "keyword": 1.4}) == {"vector": 1.0, "keyword": 1.4}
