"""Foresight keeps only searched lessons, procedures and preferences with evidence that they
apply, and says which evidence."""
from __future__ import annotations

from datetime import datetime, timezone
from uuid import uuid4

from memplane_server.core.model import Kind, Layer, MemoryRecord, Scope, ScoreComponent, SearchHit, Status
from memplane_server.core.reflection.foresight import advice_for, plan_text


def hit(kind: Kind, content: str, *components: ScoreComponent, context: str = "") -> SearchHit:
    now = datetime.now(timezone.utc)
    memory = MemoryRecord(
        id=uuid4(), tenant_id="t", scope=Scope.GLOBAL, domain=None, agent_id=None, user_id=None, session_id=None,
        layer=Layer.PROCEDURAL, kind=kind, content=content, context=context, entity=None, attribute=None, value=None,
        tags=[], metadata={}, confidence=0.9, status=Status.ACTIVE, supersedes=None, source_type=None,
        source_id=None, occurred_at=now, valid_from=None, valid_to=None, created_at=now, updated_at=now)
    return SearchHit(memory, 0.5, list(components))


def vector(cosine: float, rank: int) -> ScoreComponent:
    return ScoreComponent("vector", cosine, rank)


def test_the_plan_text_names_the_entities_and_tools():
    assert plan_text(" Deploy billing ", ["billing"], ["kubectl"]) == "Deploy billing; involving billing; using kubectl"


def test_lessons_are_risks_procedures_rules_and_preferences_preferences():
    hits = [hit(Kind.LESSON, "a", vector(0.84, 1)), hit(Kind.PROCEDURE, "b", vector(0.84, 2)),
            hit(Kind.PREFERENCE, "c", vector(0.84, 3))]
    assert [a.kind for a in advice_for(hits, [], [])] == ["risk", "rule", "preference"]


def test_a_memory_far_from_the_best_match_without_other_evidence_is_left_out():
    near, far = hit(Kind.LESSON, "Run migrations first", vector(0.842, 1)), hit(Kind.LESSON, "Drain the queue", vector(0.807, 2))
    assert [a.hit for a in advice_for([near, far], [], [])] == [near]


def test_a_named_tool_or_entity_is_evidence_even_far_from_the_task():
    far = hit(Kind.PROCEDURE, "Use kubectl rollout undo to roll back", vector(0.70, 5), context="billing service")
    [advice] = advice_for([hit(Kind.LESSON, "x", vector(0.9, 1)), far], ["Billing"], ["kubectl"])[1:]
    assert advice.why == "names Billing; names tool kubectl"


def test_a_shared_keyword_is_evidence():
    far = hit(Kind.LESSON, "Rotate keys only after draining", vector(0.70, 4), ScoreComponent("keyword", 3.2, 1))
    [_, advice] = advice_for([hit(Kind.LESSON, "x", vector(0.9, 1)), far], [], [])
    assert advice.why == "shares its words"


def test_other_kinds_are_never_advice():
    assert advice_for([hit(Kind.FACT, "The API is on port 8080", vector(0.9, 1))], [], []) == []
