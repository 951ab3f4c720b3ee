"""The city scenario through the SDK: a summary built from user.city = Shanghai is
STALE the moment Shenzhen is written, search answers Shenzhen first, and the server's own
worker then replaces the summary with one that says Shenzhen."""
from __future__ import annotations

import time

from memplane import MemoryClient, MemoryInput, MemoryStatus


def city(value: str) -> MemoryInput:
    return MemoryInput(f"The user lives in {value}", kind="fact", entity="user", attribute="city", value=value,
                       session_id="chat-1", scope="global")


def test_a_changed_fact_makes_its_summary_stale_then_the_worker_rebuilds_it(server, new_tenant):
    _, key = new_tenant()
    with MemoryClient(server.target, key) as client:
        client.write([city("Shanghai")])
        summary = client.reflect(session_id="chat-1").memories[-1]
        assert "user.city = Shanghai" in summary.content

        client.write([city("Shenzhen")])
        assert client.get_memory(summary.id).status is MemoryStatus.STALE
        hits = client.search("where does the user live now?").hits
        assert hits[0].memory.value == "Shenzhen"

        deadline = time.monotonic() + 90  # the worker is the server's own, on a shared machine
        # The job writes the new summary, then supersedes the stale one: done when both happened.
        while client.get_memory(summary.id).status is not MemoryStatus.SUPERSEDED:
            assert time.monotonic() < deadline, "the stale summary was never rebuilt"
            time.sleep(0.2)
        served = client.list_memories(session_id="chat-1", kinds="summary").items
        assert [m.content for m in served] == ["Session chat-1: 1 active memories.\n- user.city = Shenzhen"]
