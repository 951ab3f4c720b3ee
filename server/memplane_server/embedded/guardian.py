"""A watcher process that stops the embedded services when the server dies without stopping them.

The server holds the only write end of a pipe whose read end is the guardian's stdin. The
kernel closes that end when the server exits for any reason, SIGKILL and the OOM killer
included, so end of input tells the guardian that whatever still runs in the service
folders has been abandoned. A parent-death signal would not do: pg0 daemonises the
postmaster, so it is not our child, and PR_SET_PDEATHSIG fires when the thread that
forked exits, which would stop a Redis that a supervisor thread restarted.

Run as `python -m memplane_server.embedded.guardian DATA_DIR PostgreSQL|Redis...`.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from ._process import EmbeddedError
from .model import EmbeddedModel
from .postgres import EmbeddedPostgres
from .redis import EmbeddedRedis

logger = logging.getLogger(__name__)

_SERVICES = {kind.name: kind for kind in (EmbeddedPostgres, EmbeddedRedis, EmbeddedModel)}
# Covers stop_abandoned's escalation for every service, with room to spare.
_EXIT_TIMEOUT = 30.0


class Guardian:
    """Starts the guardian of `services`, all of `data_dir`; stop() once they were stopped."""

    def __init__(self, data_dir: Path, services: list[EmbeddedPostgres | EmbeddedRedis | EmbeddedModel]) -> None:
        self._data_dir = Path(data_dir).absolute()
        self._services = [service.name for service in services]
        self._process: subprocess.Popen[bytes] | None = None
        self._pipe: int | None = None

    def start(self) -> None:
        # os.pipe() ends are not inherited, so no other child (pg0, redis-server) can hold
        # the write end open after we die.
        read_end, write_end = os.pipe()
        package_root = Path(__file__).resolve().parents[2]
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(self._data_dir), *self._services],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                # Our environment may hold secrets the guardian has no use for.
                env={"PATH": os.environ.get("PATH", os.defpath), "PYTHONPATH": str(package_root)},
                # Outside the data dir, where leftover processes are looked for.
                cwd="/",
                # A Ctrl-C or hang-up of our terminal must reach the server, which then
                # stops the services, and not end their guardian first.
                start_new_session=True,
            )
        except OSError as error:
            os.close(write_end)
            raise EmbeddedError(f"cannot start the embedded services' guardian: {error}") from error
        finally:
            os.close(read_end)
        self._pipe = write_end

    def stop(self) -> None:
        """Let the guardian go; it stops whatever of its services still runs, then exits."""
        if self._pipe is None:
            return
        os.close(self._pipe)
        self._pipe = None
        assert self._process is not None
        try:
            self._process.wait(timeout=_EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            logger.error("the embedded services' guardian (pid %d) did not exit", self._process.pid)


def main(argv: list[str]) -> None:
    data_dir, services = Path(argv[0]), argv[1:]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # A SIGTERM to the whole group (systemd's default stop) must not end the guardian while
    # the server still runs: the server exiting is what ends it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # Nothing is ever written: this returns when the server's end closes.
    sys.stdin.buffer.read()
    for name in services:
        _SERVICES[name](data_dir).stop_abandoned()


if __name__ == "__main__":
    main(sys.argv[1:])
