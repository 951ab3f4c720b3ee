"""Names of backup files and which of them to keep: no I/O, the tool does the listing and deleting."""
from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timezone

# Microseconds in the name: two backups in one second must not overwrite each other, and the
# names sort in the order the backups were taken.
_NAME = re.compile(r"memplane-\d{8}T\d{6}\.\d{6}Z\.dump")


def backup_name(taken_at: datetime) -> str:
    return taken_at.astimezone(timezone.utc).strftime("memplane-%Y%m%dT%H%M%S.%fZ.dump")


def is_backup_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def names_to_prune(names: Iterable[str], keep: int) -> list[str]:
    """The backups beyond the newest `keep`; files not named like a backup are never touched."""
    backups = sorted(n for n in names if is_backup_name(n))
    return backups[: max(len(backups) - keep, 0)]


class SchemaTooNew(Exception):
    """Data written by a newer Memplane, whose migrations this code does not know."""

    def __init__(self, what: str, version: int, known: int) -> None:
        super().__init__(
            f"{what} has schema version {version}, newer than this Memplane knows ({known});"
            " use a Memplane release at least as new as the one that wrote it"
        )
        self.version, self.known = version, known


def check_schema_version(what: str, version: int, known: int) -> None:
    if version > known:
        raise SchemaTooNew(what, version, known)
