"""`kill -9` of the server under write load, three times: every acknowledged write survives, none
is stored twice, no embedded process is left behind, and in-flight retries finish soon after the
restart."""
from __future__ import annotations

import os
import shutil
import signal
import threading
import time
import uuid

import pytest

from memplane import MemoryClient
from memplane.errors import MemplaneError
from memplane_server.embedded._process import processes_in
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, restartable_port

pytestmark = pytest.mark.slow
CYCLES = 3
WRITERS = 2


@pytest.fixture
def data_dir(monkeypatch):
    for name in ("MEMPLANE_DATABASE_URL", "MEMPLANE_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    path = make_shared_tmpdir("memplane-crash-")
    yield path / "data"
    for pid in leftovers(path / "data"):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(path, ignore_errors=True)


def leftovers(data) -> set[int]:
    return processes_in(data / "postgres" / "data") | processes_in(data / "redis")


class Writers:
    """Threads writing uniquely named turns; each write is retried with its request id until it
    is acknowledged, as an agent that must not lose a turn would."""

    def __init__(self, target: str, key: str) -> None:
        self.target, self.key = target, key
        self.acked: list[str] = []
        self.last_ack: dict[int, float] = {}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(n,)) for n in range(WRITERS)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(120)

    def _run(self, n: int) -> None:
        with MemoryClient(self.target, self.key, default_timeout=30) as client:
            i = 0
            while not self._stop.is_set() and i < 10_000:
                content, request_id = f"crash turn {n}-{i}", str(uuid.uuid4())
                while True:
                    try:
                        client.write([{"content": content, "kind": "turn", "session_id": f"s{n}"}],
                                     request_id=request_id)
                        break
                    except MemplaneError:
                        if self._stop.is_set():
                            return  # never acknowledged: it may or may not be stored
                        time.sleep(0.2)
                self.acked.append(content)
                self.last_ack[n] = time.monotonic()
                i += 1


def test_kill_9_loses_and_duplicates_nothing(data_dir):
    port = restartable_port()
    server = ServerProcess({"MEMPLANE_DATA_DIR": str(data_dir)}).start(port=port)
    key = server.key("tenant admin")
    writers = Writers(server.target, key)
    writers.start()
    try:
        for _ in range(CYCLES):
            time.sleep(3)
            server.process.send_signal(signal.SIGKILL)
            server.process.wait()
            killed = time.monotonic()
            while leftovers(data_dir):
                assert time.monotonic() - killed < 5, f"orphans: {leftovers(data_dir)}"
                time.sleep(0.2)
            server = ServerProcess({"MEMPLANE_DATA_DIR": str(data_dir)}).start(port=port)
            back = time.monotonic()
            while not all(writers.last_ack.get(n, 0) > back for n in range(WRITERS)):
                assert time.monotonic() - back < 10, "in-flight writes did not complete within 10 s of the restart"
                time.sleep(0.1)
        writers.stop()
        with MemoryClient(server.target, key) as client:
            stored, token = [], ""
            while True:
                page = client.list_memories(page_size=500, page_token=token, kinds=["turn"])
                stored += [m.content for m in page.items]
                token = page.next_page_token
                if not token:
                    break
        assert len(writers.acked) > 3 * WRITERS
        missing = set(writers.acked) - set(stored)
        duplicated = {c for c in stored if stored.count(c) > 1}
        assert not missing and not duplicated, (sorted(missing)[:5], sorted(duplicated)[:5])
    finally:
        writers.stop()
        server.stop(signal.SIGTERM)
    assert not leftovers(data_dir)
