"""PostgreSQL 18 with pgvector, launched through the pg0 binary for one data dir."""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pg0

from ._process import (
    EmbeddedError,
    ServiceAccount,
    file_tail,
    free_loopback_port,
    make_private_dir,
    processes_in,
    read_or_create_secret,
    read_pid_file,
    running_in,
    service_account,
    tail,
    terminate,
    wait_until,
)
from .service import EmbeddedService

logger = logging.getLogger(__name__)

_INSTANCE = "memplane"
_USER = "memplane"
# The first start unpacks ~110 MB and runs initdb.
_START_TIMEOUT = 180.0
_STOP_GRACE = 30
_ORPHAN_EXIT_TIMEOUT = 15.0
_ABANDONED_GRACE = 5.0


class EmbeddedPostgres(EmbeddedService):
    """A PostgreSQL server private to `data_dir/postgres`, on a free loopback port.

    Layout of data_dir/postgres: `data` is the cluster, `home` is pg0's HOME (its
    unpacked installation and instance records), `tmp` its TMPDIR, `run` the
    unix socket folder, `password` the superuser password, and `pg0` a copy of
    the launcher when running as root.
    """

    name = "PostgreSQL"

    def __init__(self, data_dir: Path, *, database: str = "memplane") -> None:
        # pg0 pastes the name into CREATE DATABASE without escaping it.
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", database):
            raise ValueError(f"unsupported database name {database!r}: use letters, digits and _")
        self._root = Path(data_dir).absolute() / "postgres"
        super().__init__(self._root)
        self._database = database
        self._account: ServiceAccount | None = None
        self._password = ""

    @property
    def dsn(self) -> str | None:
        return self._address

    def running(self) -> bool:
        """Whether the postmaster of this data dir runs (pg0 daemonises it, so it is not our child)."""
        pid = read_pid_file(self._data / "postmaster.pid")
        return pid is not None and running_in(pid, self._data)

    def stop_abandoned(self) -> None:
        """Stop the server of this data dir after its owner died; needs no lock, pg0 or password."""
        # A pg0 the owner left starting the server would launch it after we looked.
        wait_until(lambda: not processes_in(self._root), _START_TIMEOUT)
        pid = read_pid_file(self._data / "postmaster.pid")
        if pid is None or not running_in(pid, self._data):
            return
        logger.warning("stopping PostgreSQL (pid %d): the server that ran it is gone", pid)
        # Fast shutdown checkpoints; immediate shutdown and the kill leave crash recovery
        # to the next start, which is still better than a server nobody stops.
        if not terminate(pid, self._data, (signal.SIGINT, signal.SIGQUIT, signal.SIGKILL), _ABANDONED_GRACE):
            logger.error("PostgreSQL (pid %d) did not stop", pid)

    def client_tool_dirs(self) -> list[Path]:
        """Folders of the client tools (pg_dump, pg_restore, psql) bundled with the server that
        pg0 unpacked here at its first start; none before that."""
        return sorted((self._root / "home" / ".pg0" / "installation").glob("*/bin"))

    @property
    def _data(self) -> Path:
        return self._root / "data"

    def _prepare(self) -> None:
        self._account = service_account()
        self._root.mkdir(parents=True, exist_ok=True)
        if self._account is not None:
            self._account.require_traversable(self._root.parent)
        make_private_dir(self._root, self._account)
        for name in ("home", "tmp", "run"):
            make_private_dir(self._root / name, self._account)
        password_file = self._root / "password"
        if not password_file.exists() and (self._data / "PG_VERSION").exists():
            # initdb fixed the password; a new one would lock us out of the cluster.
            raise EmbeddedError(f"{password_file} is missing but the cluster in {self._data} exists")
        self._password = read_or_create_secret(password_file)

    def _launch(self) -> str:
        port = self._port or free_loopback_port()
        result = self._pg0(
            "start",
            "--name", _INSTANCE,
            "--port", str(port),
            "--data-dir", str(self._data),
            "--username", _USER,
            f"--password={self._password}",
            "--database", self._database,
            "-c", "listen_addresses=127.0.0.1",
            # The default, /tmp, would expose the socket to every local user.
            "-c", f"unix_socket_directories={self._root / 'run'}",
            timeout=_START_TIMEOUT,
        )
        if result.returncode != 0:
            raise self._error(f"pg0 start exited with status {result.returncode}", result.stdout)
        self._port = port
        logger.info("PostgreSQL started on 127.0.0.1:%d (data in %s)", port, self._data)
        return f"postgresql://{_USER}:{self._password}@127.0.0.1:{port}/{self._database}"

    def _shutdown(self) -> None:
        # Straight to the postmaster: SIGINT is pg_ctl's fast shutdown (a checkpoint, then exit).
        # `pg0 stop` took 2.1 s on an idle server against 0.1 s for this, and a SIGTERM to the
        # server must be done within its grace time plus 2 s.
        pid = read_pid_file(self._data / "postmaster.pid")
        if pid is not None and running_in(pid, self._data):
            if not terminate(pid, self._data, (signal.SIGINT, signal.SIGQUIT, signal.SIGKILL), _STOP_GRACE):
                raise EmbeddedError(f"PostgreSQL (pid {pid}) did not stop")
        else:
            result = self._pg0("stop", "--name", _INSTANCE, "--timeout", str(_STOP_GRACE), timeout=_STOP_GRACE * 2)
            if result.returncode != 0:
                raise self._error(f"pg0 stop exited with status {result.returncode}", result.stdout)
        logger.info("PostgreSQL stopped (data in %s)", self._data)

    def _stop_leftover(self) -> None:
        """Clear what a killed earlier run left behind, so that start always works."""
        pid_file = self._data / "postmaster.pid"
        pid = read_pid_file(pid_file)
        if pid is None:
            return
        if running_in(pid, self._data):
            logger.warning("stopping PostgreSQL (pid %d) left running by an earlier run", pid)
            try:
                self._shutdown()
            except EmbeddedError:
                # pg0 cannot stop a postmaster that dies meanwhile, as it then
                # lingers as a zombie; that one is cleaned up like a dead one.
                if running_in(pid, self._data):
                    raise
            if not pid_file.exists():
                return
        # The postmaster is gone, or is a zombie that pg0 and postgres mistake for a
        # live server. Its children may still be exiting: starting a new server
        # while they run would corrupt the cluster.
        if not wait_until(lambda: not processes_in(self._data), _ORPHAN_EXIT_TIMEOUT):
            raise EmbeddedError(
                f"processes {sorted(processes_in(self._data))} of a dead PostgreSQL still "
                f"run in {self._data}; stop them and retry"
            )
        logger.warning("removing stale %s (pid %d is not running)", pid_file, pid)
        pid_file.unlink(missing_ok=True)
        # On the same port, postgres would take the dead postmaster named in its socket's
        # lock file for a live one while it lingers as a zombie.
        for lock in (self._root / "run").glob(".s.PGSQL.*.lock"):
            lock.unlink(missing_ok=True)

    def _pg0(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        # A minimal environment: PG* variables of ours must not steer pg0, the
        # service account has no business seeing our secrets, and without LANG the
        # cluster gets UTF8 with C collation, which no OS locale update can change.
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(self._root / "home"),
            # pg0 leaves a world-readable .pgpass in a fresh folder under TMPDIR.
            "TMPDIR": str(self._root / "tmp"),
        }
        extra = self._account.subprocess_kwargs() if self._account else {}
        binary = self._pg0_binary()
        try:
            return subprocess.run(
                [str(binary), *args],
                env=env,
                cwd=self._root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=timeout,
                **extra,
            )
        except subprocess.TimeoutExpired as error:
            output = error.stdout.decode(errors="replace") if isinstance(error.stdout, bytes) else error.stdout
            raise self._error(f"pg0 {args[0]} did not finish within {timeout:.0f}s", output or "") from None
        except OSError as error:
            raise EmbeddedError(f"cannot run {binary}: {error}") from error
        finally:
            self._clear_tmp()

    def _pg0_binary(self) -> Path:
        bundled = Path(pg0.__file__).parent / "bin" / "pg0"
        if self._account is None:
            return bundled
        # The service account may be unable to reach site-packages (say, a checkout
        # inside a 0700 folder), so it runs a copy kept in its own folder.
        copy = self._root / "pg0"
        if not copy.exists() or copy.stat().st_size != bundled.stat().st_size:
            staging = self._root / "pg0.new"
            shutil.copyfile(bundled, staging)
            staging.chmod(0o755)
            os.replace(staging, copy)
        return copy

    def _clear_tmp(self) -> None:
        for entry in (self._root / "tmp").iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)

    def _error(self, summary: str, output: str) -> EmbeddedError:
        parts = [summary]
        if output.strip():
            parts.append(f"pg0 output:\n{tail(output)}")
        logs = sorted((self._data / "log").glob("postgresql-*.log"))
        if logs:
            parts.append(f"server log {logs[-1]}:\n{file_tail(logs[-1])}")
        # pg0 echoes the password in its output.
        return EmbeddedError("\n".join(parts).replace(self._password, "********"))
