"""A hot standby of an embedded PostgreSQL, from the same binaries (pg0's unpacked installation):
pg_basebackup with the replication settings written (-R), then postgres with hot_standby on, run as
the unprivileged account when the tests run as root."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from memplane_server.embedded._process import free_loopback_port, make_private_dir, service_account


def installation(data_dir: Path) -> Path:
    """The bin folder of the PostgreSQL that EmbeddedPostgres(data_dir) unpacked."""
    return next((data_dir / "postgres" / "home" / ".pg0" / "installation").glob("*/bin"))


class Standby:
    def __init__(self, primary_data_dir: Path, primary_url: str) -> None:
        self._bin = installation(primary_data_dir)
        self._root = primary_data_dir / "standby"
        self._primary = urlsplit(primary_url)
        self._process: subprocess.Popen | None = None

    def start(self) -> str:
        """Clones the primary and starts replaying its WAL; the standby's URL (same user and database)."""
        account = service_account()
        as_account = account.subprocess_kwargs() if account else {}
        make_private_dir(self._root, account)
        make_private_dir(self._root / "run", account)
        up = self._primary
        subprocess.run([str(self._bin / "pg_basebackup"), "-h", up.hostname, "-p", str(up.port), "-U", up.username,
                        "-D", str(self._root / "data"), "-R", "-X", "stream", "-c", "fast"],
                       env={"PGPASSWORD": up.password}, check=True, capture_output=True, timeout=120, **as_account)
        port = free_loopback_port()
        self._process = subprocess.Popen(
            [str(self._bin / "postgres"), "-D", str(self._root / "data"), "-p", str(port), "-c", "hot_standby=on",
             "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self._root / 'run'}"],
            env={"LD_LIBRARY_PATH": str(self._bin.parent / "lib")}, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, **as_account)
        url = urlunsplit(up._replace(netloc=f"{up.username}:{up.password}@127.0.0.1:{port}"))
        self._wait(port)
        return url

    def _wait(self, port: int) -> None:
        deadline = time.monotonic() + 60
        while subprocess.run([str(self._bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                             env={"LD_LIBRARY_PATH": str(self._bin.parent / "lib")},
                             capture_output=True).returncode != 0:
            if self._process.poll() is not None:
                raise RuntimeError(f"the standby exited: {self._process.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("the standby did not accept connections within 60 s")
            time.sleep(0.2)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=30)
