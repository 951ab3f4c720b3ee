"""Whole-database backups with PostgreSQL's own pg_dump and pg_restore, and the SQL around a restore.

pg_dump reads the database in one snapshot, so a backup taken while servers write is
consistent: every transaction committed before it started is in it, none that committed later.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import asyncpg


class DumpError(Exception):
    """pg_dump or pg_restore is missing, too old, or failed."""


@dataclass(frozen=True)
class ClientTools:
    """A folder holding pg_dump and pg_restore of one PostgreSQL major version."""

    bin_dir: Path
    major: int

    @classmethod
    def choose(cls, folders: Sequence[Path], server_major: int) -> "ClientTools":
        """The newest tools among `folders` and PATH: pg_dump refuses a server newer than itself."""
        candidates = [*folders]
        on_path = shutil.which("pg_dump")
        if on_path:
            # Not resolved: Debian's pg_dump is a link to a version-picking wrapper elsewhere.
            candidates.append(Path(on_path).parent)
        found = []
        for folder in candidates:
            if (folder / "pg_dump").exists() and (folder / "pg_restore").exists():
                found.append(cls(folder, _major_of(folder / "pg_dump")))
        usable = [t for t in found if t.major >= server_major]
        if not usable:
            seen = ", ".join(f"{t.bin_dir} ({t.major})" for t in found) or "none"
            raise DumpError(
                f"no pg_dump/pg_restore of PostgreSQL {server_major} or newer (found: {seen}); install the"
                f" PostgreSQL {server_major} client tools on PATH"
            )
        return max(usable, key=lambda t: t.major)

    def dump(self, database_url: str, target: Path) -> None:
        """A custom-format archive of the whole database (schema, data, grants) in `target`."""
        dsn, env = _without_password(database_url)
        self._run(["pg_dump", "--format=custom", f"--file={target}", f"--dbname={dsn}"], env)

    def schema_versions(self, archive: Path) -> list[int]:
        """The migration versions recorded in an archive's schema_migrations table."""
        out = self._run(["pg_restore", "--data-only", "--table=schema_migrations", "--file=-", str(archive)],
                        dict(os.environ))
        return parse_schema_versions(out)

    def restore(self, archive: Path, database_url: str) -> None:
        """Restores into an empty database in one transaction; objects become the connecting
        user's (the archive's owner may not exist there)."""
        dsn, env = _without_password(database_url)
        self._run(["pg_restore", "--no-owner", "--single-transaction", "--exit-on-error", f"--dbname={dsn}",
                   str(archive)], env)

    def _run(self, args: list[str], env: dict[str, str]) -> str:
        try:
            result = subprocess.run([str(self.bin_dir / args[0]), *args[1:]], env=env, stdin=subprocess.DEVNULL,
                                    capture_output=True, text=True)
        except OSError as exc:
            raise DumpError(f"cannot run {self.bin_dir / args[0]}: {exc}") from None
        if result.returncode != 0:
            raise DumpError(f"{args[0]} exited with status {result.returncode}: {result.stderr.strip()[-2000:]}")
        return result.stdout


_COPY_START = re.compile(r"^COPY (?:public\.)?schema_migrations \(version\b.*FROM stdin;$")


def parse_schema_versions(sql: str) -> list[int]:
    """Versions from pg_restore's plain-SQL output of schema_migrations (a COPY block, first column)."""
    versions, inside = [], False
    for line in sql.splitlines():
        if inside:
            if line == "\\.":
                break
            versions.append(int(line.split("\t", 1)[0]))
        elif _COPY_START.match(line):
            inside = True
    return versions


def _major_of(pg_dump: Path) -> int:
    try:
        out = subprocess.run([str(pg_dump), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    match = re.search(r"\) (\d+)", out)
    return int(match.group(1)) if match else 0


def _without_password(database_url: str) -> tuple[str, dict[str, str]]:
    """The URL without its password, which goes in the environment instead: a command line is
    readable by every local user."""
    parts = urlsplit(database_url)
    env = dict(os.environ)
    if parts.password is None:
        return database_url, env
    env["PGPASSWORD"] = unquote(parts.password)
    host = parts.netloc.rsplit("@", 1)[1]
    user = parts.netloc.rsplit("@", 1)[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}")), env


async def server_major(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SHOW server_version_num")) // 10000


async def is_empty(conn: asyncpg.Connection) -> bool:
    """Whether the database holds no tables or other relations of its own."""
    return not await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%')"
    )


async def prepare_restore(conn: asyncpg.Connection) -> None:
    """Roles belong to the cluster, not the database, so an archive has the grants and policies
    naming memplane_app but not the role: made here as migration 0002 makes it."""
    await conn.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'memplane_app') THEN"
        " CREATE ROLE memplane_app NOLOGIN; END IF; END $$"
    )
    await conn.execute(
        "DO $$ BEGIN IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN"
        " EXECUTE format('GRANT memplane_app TO %I', current_user); END IF; END $$"
    )


async def finish_restore(conn: asyncpg.Connection) -> None:
    """A restore leaves no planner statistics; without them the first searches plan blind."""
    await conn.execute("ANALYZE")
