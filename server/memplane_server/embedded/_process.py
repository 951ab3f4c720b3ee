"""Helpers shared by the embedded service launchers."""

from __future__ import annotations

import fcntl
import logging
import os
import pwd
import secrets
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

SERVICE_USER = "memplane"
SUGGESTED_DATA_DIR = "/var/lib/memplane"


class EmbeddedError(Exception):
    """An embedded service could not be started or stopped."""


@dataclass(frozen=True)
class ServiceAccount:
    """The unprivileged account that runs a service when we are root."""

    name: str
    uid: int
    gid: int

    def subprocess_kwargs(self) -> dict[str, Any]:
        # Without extra_groups=[] the child would keep root's supplementary groups.
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def own(self, path: Path) -> None:
        os.chown(path, self.uid, self.gid)

    def require_traversable(self, folder: Path) -> None:
        """Raise unless this account can reach `folder` through each of its ancestors."""
        for ancestor in (folder, *folder.parents):
            info = ancestor.stat()
            if info.st_uid == self.uid:
                needed = stat.S_IXUSR
            elif info.st_gid == self.gid:
                needed = stat.S_IXGRP
            else:
                needed = stat.S_IXOTH
            if not info.st_mode & needed:
                raise EmbeddedError(
                    f"PostgreSQL runs as the unprivileged user '{self.name}' when started "
                    f"as root, and that user cannot traverse {ancestor} (mode "
                    f"{stat.filemode(info.st_mode)}) to reach {folder}. Use a data dir it "
                    f"can reach, such as {SUGGESTED_DATA_DIR}."
                )


def service_account() -> ServiceAccount | None:
    """The account to run PostgreSQL as, or None to run it as ourselves.

    PostgreSQL refuses to run as root, so root hands it to a system user,
    created on first use.
    """
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        logger.info("creating system user %s to run PostgreSQL", SERVICE_USER)
        created = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
            capture_output=True,
            text=True,
        )
        try:
            entry = pwd.getpwnam(SERVICE_USER)
        except KeyError:
            raise EmbeddedError(
                f"could not create system user {SERVICE_USER}: {created.stderr.strip()}"
            ) from None
    return ServiceAccount(SERVICE_USER, entry.pw_uid, entry.pw_gid)


def make_private_dir(path: Path, account: ServiceAccount | None = None) -> None:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    if account is not None:
        account.own(path)


def write_private_file(path: Path, content: str) -> None:
    """Write `content` so that it is never readable by others, not even briefly."""
    staging = path.with_name(path.name + ".new")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(content)
    # Replacing means a crash mid-write never leaves a truncated file behind.
    os.replace(staging, path)


def read_or_create_secret(path: Path) -> str:
    """The secret stored in `path`, generated on first use."""
    if path.exists():
        return path.read_text().strip()
    # Hex: a secret starting with '-' would be read as a flag on a command line, and one with
    # URL-reserved characters would need quoting inside a DSN.
    secret = secrets.token_hex(32)
    write_private_file(path, secret + "\n")
    return secret


def free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def read_pid_file(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return None


def running_in(pid: int, directory: Path) -> bool:
    """Whether `pid` is a live process working in `directory`.

    The folder tells a server left over by an earlier run from an unrelated
    process that reused its pid. Zombies count as dead (their folder cannot be
    read): where PID 1 does not reap orphans (containers without an init) a
    killed server lingers as a zombie that still answers kill(pid, 0).
    """
    if not Path("/proc/self").exists():
        return _signalable(pid)  # no procfs (macOS): trust the pid file
    try:
        return os.readlink(f"/proc/{pid}/cwd") == str(directory.resolve())
    except OSError:
        return False


def processes_in(directory: Path) -> set[int]:
    """Live processes working in `directory` (none found without procfs)."""
    pids = (int(entry.name) for entry in Path("/proc").glob("[0-9]*"))
    return {pid for pid in pids if running_in(pid, directory)}


def _signalable(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def terminate(pid: int, directory: Path, signals: Sequence[int], grace: float) -> bool:
    """Send `signals` in turn, each given `grace` seconds, until `pid` no longer runs in
    `directory`; whether it stopped."""
    for sig in signals:
        if not running_in(pid, directory):
            return True
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        if wait_until(lambda: not running_in(pid, directory), grace):
            return True
    return False


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


def tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def file_tail(path: Path, lines: int = 20) -> str:
    try:
        return tail(path.read_text(errors="replace"), lines)
    except OSError:
        return ""


class DirLock:
    """An exclusive lock on a service folder, held from start to stop.

    The kernel drops it when the holder dies, so a crashed run never blocks the
    next start, while a live one keeps a second process from taking the
    service over (and stopping it as a leftover).
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise EmbeddedError(f"{self._path.parent} is in use by another running process") from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
