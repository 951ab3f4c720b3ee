"""The embedded services live exactly as long as `memplane serve`: restarted when they die,
stopped when the server is killed."""
from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memplane import MemoryClient
from memplane_server.embedded._process import processes_in, read_pid_file, running_in
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def first_run():
    """A data dir a first server initialised and left: (data dir, tenant admin key, a memory id)."""
    path = make_shared_tmpdir("memplane-lifecycle-")
    data = path / "data"
    server = embedded_server(data)
    try:
        key = server.key("tenant admin")
        with MemoryClient(server.target, key) as client:
            [memory] = client.write([{"content": "The release train leaves on Thursdays", "kind": "fact"}]).memories
    finally:
        assert server.stop(signal.SIGTERM) == 0
    yield data, key, memory.id
    for pid in leftovers(data):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(autouse=True)
def embedded_default(monkeypatch):
    for name in ("MEMPLANE_DATABASE_URL", "MEMPLANE_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)


def embedded_server(data: Path) -> ServerProcess:
    return ServerProcess({"MEMPLANE_DATA_DIR": str(data), "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "2"}).start()


def test_killed_children_come_back_on_their_ports(first_run):
    data, key, memory_id = first_run
    server = embedded_server(data)
    try:
        postmaster, postgres_port = postmaster_of(data)
        redis_pid, redis_port = redis_of(data)
        os.kill(redis_pid, signal.SIGKILL)
        os.kill(postmaster, signal.SIGKILL)

        wait_for(lambda: postmaster_of(data)[0] not in (None, postmaster) and redis_of(data)[0] not in (None, redis_pid))
        assert postmaster_of(data)[1] == postgres_port and redis_of(data)[1] == redis_port
        with MemoryClient(server.target, key) as client:
            # The pools find out about the new servers on their first call on a dead connection.
            wait_for(lambda: succeeds(lambda: client.get_memory(memory_id)))
            assert client.get_memory(memory_id).content == "The release train leaves on Thursdays"
            client.write([{"content": "note", "kind": "turn", "layer": "working", "session_id": "s"}])
            assert len(client.get_working_memory("s").items) == 1
        assert sum("restarting it" in line for line in server.lines) == 2
    finally:
        assert server.stop(signal.SIGTERM) == 0
    assert not leftovers(data)


def test_a_killed_server_leaves_nothing_running_and_starts_again(first_run):
    data, key, memory_id = first_run
    server = embedded_server(data)
    assert postmaster_of(data)[0] and redis_of(data)[0]
    assert server.stop(signal.SIGKILL) == -signal.SIGKILL
    wait_for(lambda: not leftovers(data), timeout=10)

    again = embedded_server(data)
    try:
        with MemoryClient(again.target, key) as client:
            assert client.get_memory(memory_id).content == "The release train leaves on Thursdays"
    finally:
        assert again.stop(signal.SIGTERM) == 0
    assert not leftovers(data)


def postmaster_of(data: Path) -> tuple[int | None, int | None]:
    """The running postmaster's pid and port."""
    folder = data / "postgres" / "data"
    pid = read_pid_file(folder / "postmaster.pid")
    if pid is None or not running_in(pid, folder):
        return None, None
    lines = (folder / "postmaster.pid").read_text().splitlines()
    return (pid, int(lines[3])) if len(lines) > 3 else (None, None)


def redis_of(data: Path) -> tuple[int | None, int | None]:
    """The running redis-server's pid and port."""
    folder = data / "redis"
    pid = read_pid_file(folder / "redis.pid")
    if pid is None or not running_in(pid, folder):
        return None, None
    config = (folder / "redis.conf").read_text()
    return pid, int(next(line.split()[1] for line in config.splitlines() if line.startswith("port ")))


def leftovers(data: Path) -> set[int]:
    """Embedded services of `data` and their guardian."""
    guardians = set()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"memplane_server.embedded.guardian" in command and str(data).encode() in command:
            guardians.add(int(entry.name))
    return processes_in(data / "postgres" / "data") | processes_in(data / "redis") | guardians


def succeeds(call: Callable[[], object]) -> bool:
    try:
        call()
    except Exception:
        return False
    return True


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
