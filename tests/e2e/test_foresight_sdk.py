"""Foresee through the SDK: before a task, the applicable lesson comes back as a risk with why."""
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
