"""Stands in for the pgvector/pgvector image in the compose check (no registry is reachable here):
PostgreSQL 18 with pgvector from the pg0 binary the memplane image already holds, configured as that
image is, by POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB, its data in /var/lib/postgresql/data,
listening on every address at 5432, in the foreground until SIGTERM."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pg0

DATA = Path("/var/lib/postgresql/data")
PG0 = Path(pg0.__file__).parent / "bin" / "pg0"


def postmaster_pid() -> int:
    return int((DATA / "postmaster.pid").read_text().split()[0])


def main() -> int:
    user = os.environ.get("POSTGRES_USER", "postgres")
    started = subprocess.run(
        [str(PG0), "start", "--name", "standin", "--port", "5432", "--data-dir", str(DATA), "--username", user,
         f"--password={os.environ['POSTGRES_PASSWORD']}", "--database", os.environ.get("POSTGRES_DB", user),
         "-c", "listen_addresses=*", "-c", "unix_socket_directories=/tmp"], stdout=sys.stdout, stderr=sys.stderr)
    if started.returncode != 0:
        return started.returncode
    hba = DATA / "pg_hba.conf"
    if "host all all all scram-sha-256" not in hba.read_text():
        with hba.open("a") as f:
            f.write("host all all all scram-sha-256\n")
        os.kill(postmaster_pid(), signal.SIGHUP)
    pid = postmaster_pid()
    signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGINT))  # fast shutdown, as the image's
    print("database system is ready to accept connections", flush=True)
    while Path(f"/proc/{pid}").exists():
        time.sleep(0.5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
