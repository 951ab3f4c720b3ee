"""Conflicts through the SDK: two agents disagree, the second value waits for confirmation,
Search explains the dispute, and resolve_conflict settles it."""
from __future__ import annotations

from memplane import MemoryClient, MemoryStatus


def office(value: str) -> dict:
    return {"content": f"The office is in {value}", "kind": "fact", "entity": "office", "attribute": "city",
            "value": value, "scope": "global"}


def test_two_agents_disagree_then_the_challenger_is_confirmed(server, new_tenant):
    _, key = new_tenant()
    with MemoryClient(server.target, key, agent_id="a1") as a1, MemoryClient(server.target, key, agent_id="a2") as a2:
        [current] = a1.write([office("Berlin")]).memories
        [challenger] = a2.write([office("Munich")]).memories
        assert challenger.status is MemoryStatus.NEEDS_CONFIRMATION and challenger.conflicts_with == current.id

        [hit] = [h for h in a1.search("which city is the office in?", explain=True).hits if h.memory.id == current.id]
        assert any(c.name == "conflict" and challenger.id in c.detail for c in hit.explanation)
        [conflict] = a1.list_conflicts(entity="office").items
        assert (conflict.current.id, conflict.challenger.id, conflict.reason) == (
            current.id, challenger.id, "agents a1 and a2 disagree")

        resolved = a1.resolve_conflict(challenger.id, keep="challenger", reason="confirmed with the user")
        assert resolved.kept.status is MemoryStatus.ACTIVE and resolved.superseded.id == current.id
        assert a1.list_conflicts().items == ()
