"""Search's token estimate and budget cut (core/retrieval/ranking.py), on hand-built hits."""
from __future__ import annotations

from datetime import datetime, timezone
from uuid import uuid4

from memplane_server.core.model import Kind, Layer, MemoryRecord, Scope, SearchHit, Status
from memplane_server.core.retrieval.ranking import approx_tokens, within_budget


def hit(content: str, score: float = 1.0) -> SearchHit:
    now = datetime(2024, 1, 1, tzinfo=timezone.utc)
    record = MemoryRecord(
        id=uuid4(), tenant_id="acme", scope=Scope.GLOBAL, domain=None, agent_id=None, user_id=None, session_id=None,
        layer=Layer.SEMANTIC, kind=Kind.FACT, content=content, context="", entity=None, attribute=None, value=None,
        tags=[], metadata={}, confidence=1.0, status=Status.ACTIVE, supersedes=None, source_type=None,
        source_id=None, occurred_at=now, valid_from=None, valid_to=None, created_at=now, updated_at=now,
    )
    return SearchHit(record, score)


def test_approx_tokens_counts_about_four_english_characters_a_token_plus_one():
    assert approx_tokens("") == 1
    assert approx_tokens("abc") == 1
    assert approx_tokens("a" * 40) == 11


def test_approx_tokens_counts_each_cjk_character_as_a_token():
    assert approx_tokens("我住在上海朝阳区") == 9  # 8 characters + 1
    assert approx_tokens("㐀䶵") == 3  # CJK extension A counts too


def test_approx_tokens_of_mixed_text_takes_the_larger_estimate():
    text = "上海" + "x" * 40  # 42 chars -> 10 by length, 2 by CJK
    assert approx_tokens(text) == 11


def test_zero_budget_keeps_every_hit():
    hits = [hit("a" * 400) for _ in range(5)]
    assert within_budget(hits, 0) == hits


def test_budget_keeps_hits_in_order_until_the_next_would_overflow():
    hits = [hit("a" * 36), hit("b" * 36), hit("c" * 36)]  # 10 tokens each
    assert within_budget(hits, 25) == hits[:2]


def test_budget_stops_at_first_overflow_even_if_a_later_hit_would_fit():
    hits = [hit("a" * 36), hit("b" * 400), hit("c")]  # 10, 101, 1 tokens
    assert within_budget(hits, 20) == hits[:1]


def test_budget_exactly_filled_keeps_all_hits():
    hits = [hit("a" * 36), hit("b" * 36)]
    assert within_budget(hits, 20) == hits


def test_budget_smaller_than_the_first_hit_still_keeps_that_hit():
    hits = [hit("a" * 4000), hit("b")]
    assert within_budget(hits, 1) == hits[:1]


def test_budget_of_no_hits_is_no_hits():
    assert within_budget([], 10) == []
