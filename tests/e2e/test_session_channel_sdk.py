"""The session channel through the SDK: with MEMPLANE_SESSION_WEIGHT on, a question about what
happened around an event reaches the session whose digest names it, and explain says so."""
from __future__ import annotations

import asyncio
import shutil
import time

import pytest

from memplane import MemoryClient
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, fresh_database


@pytest.fixture(scope="module")
def session_server(services_urls):
    database_url = asyncio.run(fresh_database(services_urls[0], "memplane_sessions"))
    data = make_shared_tmpdir("memplane-sessions-")
    server = ServerProcess({
        "MEMPLANE_DATABASE_URL": database_url, "MEMPLANE_REDIS_URL": services_urls[1].rsplit("/", 1)[0] + "/5",
        "MEMPLANE_DATA_DIR": str(data), "MEMPLANE_BOOTSTRAP_TENANT": "acme", "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "2",
        "MEMPLANE_SESSION_DIGESTS": "true", "MEMPLANE_SESSION_WEIGHT": "1", "MEMPLANE_SESSION_TOP_SESSIONS": "1", "MEMPLANE_CONTEXT_QUIET_SECONDS": "0",
        "MEMPLANE_CONTEXT_VECTORS": "average",
    }).start()
    yield server
    server.stop()
    shutil.rmtree(data, ignore_errors=True)


def test_a_search_with_the_session_channel_returns_a_turn_of_the_right_session_with_why(session_server):
    with MemoryClient(session_server.target, session_server.key("tenant admin")) as client:
        client.write([{"content": c, "kind": "turn", "session_id": "move"} for c in (
            "Jo: we finally moved to Lisbon", "Kim: how did it go?", "Jo: the movers broke a lamp")])
        client.write([{"content": c, "kind": "turn", "session_id": "pottery"} for c in (
            "Jo: I started a pottery class", "Kim: what did you make?", "Jo: a lamp base")])
        deadline = time.monotonic() + 60
        while client.get_stats().sessions_awaiting_context:
            assert time.monotonic() < deadline, "the sessions were never built"
            time.sleep(0.2)
        hits = client.search("what happened around the move to Lisbon", top_k=10, explain=True).hits
    via = [(h, c) for h in hits for c in h.explanation if c.name == "session"]
    assert via and {h.memory.session_id for h, _ in via} == {"move"}
    assert "session 'move'" in via[0][1].detail and "lisbon" in via[0][1].detail
