"""The embedded default end to end: `memplane serve` with nothing configured, stopped and started again."""
from __future__ import annotations

import shutil
import signal

import pytest

from memplane import MemoryClient
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture
def data_dir():
    path = make_shared_tmpdir("memplane-restart-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def embedded_server(data_dir) -> ServerProcess:
    env = {"MEMPLANE_DATA_DIR": str(data_dir / "data"), "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "5"}
    return ServerProcess({k: v for k, v in env.items()}).start()


def test_acknowledged_write_survives_a_restart(data_dir, monkeypatch):
    for name in ("MEMPLANE_DATABASE_URL", "MEMPLANE_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    first = embedded_server(data_dir)
    key = first.key("tenant admin")
    with MemoryClient(first.target, key) as client:
        [memory] = client.write([{"content": "The release train leaves on Thursdays", "kind": "fact"}]).memories
        client.write([{"content": "working note", "kind": "turn", "layer": "working", "session_id": "s"}])
    assert first.stop(signal.SIGTERM) == 0

    second = embedded_server(data_dir)
    try:
        assert not any("key:" in line for line in second.lines), "keys are printed only on first start"
        with MemoryClient(second.target, key) as client:
            assert client.get_memory(memory.id).content == "The release train leaves on Thursdays"
            assert client.search("when does the release train leave").hits[0].memory.id == memory.id
            assert len(client.get_working_memory("s").items) == 1
    finally:
        assert second.stop(signal.SIGTERM) == 0
    assert any("shutting down" in line for line in second.lines)
