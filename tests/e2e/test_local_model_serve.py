"""MEMPLANE_LOCAL_MODEL, one setting: `memplane serve` starts the packaged model on loopback as it
starts its embedded services, extraction runs on it through the SDK, and it stops with the server."""
from __future__ import annotations

import asyncio

from memplane import MemoryClient
from memplane_server.embedded._process import processes_in
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, fresh_database
from tests.support.keys import ENCRYPTION_KEYS
from tests.support.local_model import installed_model


def test_serve_runs_extraction_on_the_local_model_and_stops_it(services_urls, database_settings, redis_url_for):
    database_url, redis_url = services_urls
    url = asyncio.run(fresh_database(database_url, "memplane_local_model"))
    data = make_shared_tmpdir("memplane-local-model-")
    server = ServerProcess({
        **{f"MEMPLANE_{name.upper()}": str(value).lower() if isinstance(value, bool) else value
           for name, value in database_settings(url).items()},
        "MEMPLANE_REDIS_URL": redis_url_for(redis_url.rsplit("/", 1)[0] + "/4"),
        "MEMPLANE_DATA_DIR": str(data), "MEMPLANE_BOOTSTRAP_TENANT": "acme", "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "2",
        "MEMPLANE_ENCRYPTION_KEYS": ENCRYPTION_KEYS, "MEMPLANE_USER_KEYS_DIR": str(data / "keys" / "users"),
        "MEMPLANE_LOCAL_MODEL": str(installed_model()), "MEMPLANE_LOCAL_MODEL_THREADS": "2",
    }).start(timeout=300)
    try:
        assert processes_in(data / "model"), "the model server runs in the data dir"
        with MemoryClient(server.target, server.key("tenant admin")) as client:
            written = client.write([{"content": "My favourite colour is green.", "kind": "turn", "session_id": "s1",
                                     "user_id": "u1"}], infer="sync", timeout=240)
        assert written.operation is None, "extraction ran on the model and its answer fit the schema"
        assert any("green" in (m.value or m.content).lower() for m in written.extracted)
    finally:
        assert server.stop() == 0
    assert not processes_in(data / "model"), "the model server stopped with the server"
