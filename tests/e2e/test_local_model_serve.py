"""MEMPLANE_LOCAL_MODEL, one setting: `memplane serve` starts the packaged model on loopback as it
starts its embedded services, extraction runs on it through the SDK, and it stops with the server."""
from __future__ import annotations

import asyncio

from memplane import MemoryClient
from memplane_server.embedded._process import processes_in
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, fresh_database, server_env
from tests.support.local_model import installed_model


def test_serve_runs_extraction_on_the_local_model_and_stops_it(services_urls, database_settings, redis_url_for):
    database_url, redis_url = services_urls
    url = asyncio.run(fresh_database(database_url, "memplane_local_model"))
    data = make_shared_tmpdir("memplane-local-model-")
    server = ServerProcess({
        **server_env(database_settings(url), redis_url_for(redis_url.rsplit("/", 1)[0] + "/9"), data),
        "MEMPLANE_LOCAL_MODEL": str(installed_model()), "MEMPLANE_LOCAL_MODEL_THREADS": "2",
        # The first answer processes the whole prompt (about 22 s alone on 2 cores); on a loaded
        # machine it passed the default 60 s, and extraction was left to a job.
        "MEMPLANE_LLM_TIMEOUT_SECONDS": "220",
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
