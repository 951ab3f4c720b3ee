"""The keys a process opens sealed rows with: the key-encryption keys (from the settings, their
file, or the embedded default's own), the folder of users' keys and the checks that a server can
open what its database holds. The server (runtime.py) and the command-line tools share them."""
from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from .embedded._process import write_private_file
from .settings import Settings
from .stores.postgres.content.keys import TenantKeyStore
from .stores.postgres.content.user_keys import record_store, recorded_store, sweep_pending_since
from .stores.sealing import OPENERS, Kek, describe, new_kek_line, parse_keks
from .stores.user_keys import UserKeyFiles

log = logging.getLogger(__name__)


KEK_FILE = Path("keys") / "kek"


def key_encryption_keys(s: Settings, *, embedded: bool, create: bool = True) -> list[Kek]:
    """The KEKs from the settings or their file; on the embedded default without either, a key of
    its own kept in the data directory (0600), outside the database and its backups (made on the
    server's first start; a tool run beside it only reads it)."""
    if s.encryption_keys is not None:
        return parse_keks(s.encryption_keys.get_secret_value())
    if s.encryption_keys_file is not None:
        return parse_keks(s.encryption_keys_file.read_text())
    if not embedded:
        return []
    path = s.data_dir / KEK_FILE
    if not path.exists():
        if not create:
            return []
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # An id of its own: a data directory made afresh (a restore) must not take its new key for
        # the old one it replaces.
        write_private_file(path, new_kek_line(f"local-{secrets.token_hex(4)}") + "\n")
        log.warning("memories are stored sealed under a key made now, %s: keep a copy apart from the backups,"
                    " which never hold it; without it nothing stored can be read (docs/security.md)", path)
    return parse_keks(path.read_text())


async def refuse_missing_keks(store: TenantKeyStore, held: set[str]) -> None:
    """A server that could not open what the database holds does not start: every read of it would
    fail (a restore into a fresh data directory without the old key file, a KEK left out)."""
    missing = sorted({describe(wrapped).kek_id for _, _, wrapped in await store.all_keys()} - held)
    if missing:
        raise SystemExit(
            f"the database holds data keys wrapped by key-encryption key(s) {', '.join(missing)}, which this server"
            " lacks: give them in MEMPLANE_ENCRYPTION_KEYS or MEMPLANE_ENCRYPTION_KEYS_FILE (after a restore into a"
            " fresh data directory, copy the old MEMPLANE_DATA_DIR/keys/kek into it); docs/security.md")


USER_KEYS_DIR = Path("keys") / "users"


def user_keys_folder(s: Settings, *, embedded: bool) -> Path | None:
    return s.user_keys_dir or (s.data_dir / USER_KEYS_DIR if embedded else None)


def user_key_files(s: Settings, keks: list[Kek], *, embedded: bool) -> UserKeyFiles | None:
    """Where users' keys are kept (None: nowhere, memories about a user take the tenant's key)."""
    folder = user_keys_folder(s, embedded=embedded)
    if not keks or folder is None:
        return None
    return UserKeyFiles(folder, OPENERS, keks[0].id)


def install_user_keys(s: Settings, files: UserKeyFiles | None) -> None:
    """The folder every row of this process opens users' keys from (one per process)."""
    if files is not None:
        OPENERS.user_keys = files
        OPENERS.user_key_seconds = s.key_cache_seconds


async def check_user_key_store(pool: asyncpg.Pool, files: UserKeyFiles | None) -> None:
    """The database's rows name users' keys in one folder: a server given another (an empty one
    after a restore, one per replica) or none would read every user's memories as erased."""
    recorded = await recorded_store(pool)
    if files is None:
        if recorded is not None:
            raise SystemExit(
                f"this database's memories about users are sealed under users' keys kept in folder {recorded}, and"
                " this server has no MEMPLANE_USER_KEYS_DIR (or no KEK): point it at that folder; docs/security.md")
        return
    ours = await asyncio.to_thread(files.open)
    recorded = await record_store(pool, ours)
    if recorded != ours:
        raise SystemExit(
            f"this database's users' keys are in key folder {recorded}; MEMPLANE_USER_KEYS_DIR ({files.folder}) holds"
            f" folder {ours}: give every server sharing the database that folder (after a restore into a fresh data"
            " directory, copy the old MEMPLANE_DATA_DIR/keys with it); docs/security.md")


async def refuse_unswept_restore(pool: asyncpg.Pool) -> None:
    """A restore whose sweep is not done holds the memories of users erased since its backup: served,
    they would give away those users' ids, attributes and times, though their texts no longer open."""
    restored = await sweep_pending_since(pool)
    if restored is not None:
        raise SystemExit(
            f"this database was restored from a backup at {restored:%Y-%m-%d %H:%M:%S %Z} and its sweep of users erased"
            " since that backup is not done: with the old MEMPLANE_DATA_DIR/keys folder (or MEMPLANE_USER_KEYS_DIR) in"
            " place, run `memplane keys sweep`, then start servers and workers; docs/operations.md")


@dataclass(frozen=True)
class ToolKeys:
    active_kek: str | None  # None: encryption off
    users: UserKeyFiles | None


def open_with_keys(s: Settings) -> ToolKeys:
    """For a tool outside the server: this deployment's KEKs and users' keys, so that it can open
    what the server sealed."""
    keks = key_encryption_keys(s, embedded=not s.database_url, create=False)
    OPENERS.add(keks)
    users = user_key_files(s, keks, embedded=not s.database_url)
    install_user_keys(s, users)
    return ToolKeys(keks[0].id if keks else None, users)
