"""A real PgBouncer (Debian's package, scripts/install_container_runtime.py) in transaction mode in
front of the tests' PostgreSQL: each transaction may get any server connection, so a test run through
it fails wherever something rides on a connection between transactions."""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from memplane_server.embedded._process import free_loopback_port, make_private_dir, service_account

BINARY = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
# Few server connections for many clients: transactions of different clients share them, which is
# what makes connection state leak or vanish if any is left.
SERVER_CONNECTIONS = 4
START_ATTEMPTS = 3


class PortTaken(RuntimeError):
    """Another process bound the chosen port first."""


def available() -> bool:
    return Path(BINARY).exists()


class PgBouncer:
    def __init__(self, data_dir: Path, upstream: str, server_connections: int = SERVER_CONNECTIONS) -> None:
        self._root = data_dir / "pgbouncer"
        self._server_connections = server_connections
        self._upstream = urlsplit(upstream)
        self._process: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> str:
        """Starts it; the URL of the upstream's database through it. The port is free when chosen but
        may be taken before PgBouncer binds it (the test workers start servers side by side): then
        it is started again on another."""
        account = service_account()  # PgBouncer, like PostgreSQL, refuses to run as root
        make_private_dir(self._root, account)
        for attempt in range(START_ATTEMPTS):
            try:
                return self._start_on(free_loopback_port(), account)
            except PortTaken:
                if attempt == START_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def _start_on(self, port: int, account) -> str:
        up = self._upstream
        self.port = port
        log = self._root / "pgbouncer.log"
        log.unlink(missing_ok=True)
        (self._root / "users.txt").write_text(f'"{up.username}" "{up.password}"\n')
        (self._root / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={up.hostname} port={up.port} user={up.username} password={up.password}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = plain\nauth_file = {self._root / 'users.txt'}\n"
            f"pool_mode = transaction\ndefault_pool_size = {self._server_connections}\nmax_client_conn = 500\n"
            f"logfile = {log}\n"
        )
        for path in self._root.iterdir():
            path.chmod(0o600)
            if account is not None:
                account.own(path)
        self._process = subprocess.Popen(
            [BINARY, str(self._root / "pgbouncer.ini")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            **(account.subprocess_kwargs() if account else {}))
        url = urlunsplit(up._replace(netloc=f"{up.username}:{up.password}@127.0.0.1:{self.port}"))
        self._wait(url, log)
        return url

    def _wait(self, url: str, log: Path) -> None:
        import asyncio

        async def answers() -> bool:
            try:
                conn = await asyncpg.connect(url, statement_cache_size=0, timeout=2)
            except (OSError, asyncpg.PostgresError):
                return False
            await conn.close()
            return True

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                # PgBouncer writes why to its log file; its stderr holds only what the forking
                # process's libraries printed.
                said = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                if "Address already in use" in said:
                    raise PortTaken(said)
                raise RuntimeError(f"pgbouncer exited: {said or self._process.stderr.read().decode()[-2000:]}")
            if asyncio.run(answers()):
                return
            time.sleep(0.2)
        raise RuntimeError("pgbouncer did not answer within 30 s")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=10)
