"""Foresee and Consolidate through the SDK: before a task the applicable lesson comes back as a risk
with why; a dry run reports the similar lessons."""
from __future__ import annotations

from memplane import AdviceKind, MemoryClient


def test_foresee_returns_the_applicable_lesson_as_a_risk(server, new_tenant):
    _, key = new_tenant()
    with MemoryClient(server.target, key) as client:
        [lesson, _] = client.write([
            {"content": "Run the migrations before deploying the billing API", "kind": "lesson"},
            {"content": "The user prefers tea", "kind": "preference"},
        ]).memories
        advice = client.foresee("Deploy the billing API to production", entities=["billing"])
    assert advice[0].memory.id == lesson.id and advice[0].kind is AdviceKind.RISK
    assert "names billing" in advice[0].why


def test_a_consolidation_dry_run_through_the_sdk_reports_the_similar_lessons(server, new_tenant):
    _, key = new_tenant()
    with MemoryClient(server.target, key) as client:
        written = client.write([
            {"content": "Drain the job queue before rotating the deploy keys", "kind": "lesson"},
            {"content": "Always empty the queue first when you rotate keys", "kind": "lesson"},
            {"content": "Run the database migrations before deploying the API", "kind": "lesson"},
        ]).memories
        [cluster] = client.consolidate(dry_run=True)
    assert {m.id for m in cluster.members} == {written[0].id, written[1].id} and cluster.consolidated is None
