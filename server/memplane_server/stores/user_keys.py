"""Users' keys, kept in a folder outside the database and so outside its backups: one file per
user of a tenant (named by the user's subject, the sha256 of tenant and user id that erasure
receipts give), holding the key's id and the key wrapped by a KEK. Erasing a user destroys the
file; every backup and export made before then holds that user's memories sealed under a key that
no longer exists (docs/security.md, crypto-shredding).

Servers that share a database share this folder (the embedded default keeps it beside the KEK,
in MEMPLANE_DATA_DIR/keys/users; several servers mount one volume). The folder has an id of its
own, which the database records on first use, so a server given another folder (an empty one
after a restore, or one per replica) refuses to start instead of treating every user as erased.

Changes (a new key, a destroyed one, a re-wrap) hold a lock on the folder: they are rare, and a
re-wrap must never write back a key an erasure destroyed meanwhile.
"""
from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..core.forget.erasure import subject_of
from .sealing import KEY_ID_BYTES, Keyring, describe, user_key_parts, user_key_ref

STORE_ID_FILE = "store-id"
_LOCK_FILE = ".lock"


class UserKeyFiles:
    def __init__(self, folder: Path, ring: Keyring, active_kek: str) -> None:
        self.folder = folder
        self.ring = ring
        self.active_kek = active_kek

    def open(self) -> str:
        """Makes the folder (0700) and its id on first use; returns the id."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.folder / STORE_ID_FILE
        with self._locked():
            if not path.exists():
                _put(path, str(uuid.uuid4()).encode())
        return path.read_text().strip()

    def store_id(self) -> str | None:
        path = self.folder / STORE_ID_FILE
        return path.read_text().strip() if path.exists() else None

    def _path(self, subject: str) -> Path:
        return self.folder / subject[:2] / subject

    def read(self, ref: bytes) -> bytes | None:
        subject, key_id = user_key_parts(ref)
        stored = self._read(subject)
        return stored[1] if stored is not None and stored[0] == key_id else None

    def exists(self, ref: bytes) -> bool:
        subject, key_id = user_key_parts(ref)
        stored = self._read(subject)
        return stored is not None and stored[0] == key_id

    def _read(self, subject: str) -> tuple[bytes, bytes] | None:
        try:
            data = self._path(subject).read_bytes()
        except FileNotFoundError:
            return None
        if not any(data[:KEY_ID_BYTES]):  # being destroyed: overwritten, not yet unlinked
            return None
        return data[:KEY_ID_BYTES], data[KEY_ID_BYTES:]

    def current_ref(self, tenant_id: str, user_id: str) -> bytes | None:
        """The user's key reference, None when the user has no key."""
        subject = subject_of(tenant_id, user_id)
        stored = self._read(subject)
        return user_key_ref(subject, stored[0]) if stored is not None else None

    def current(self, tenant_id: str, user_id: str) -> bytes:
        """The reference new memories about the user are sealed under: its key, made on first use
        (a user erased before gets a new one)."""
        subject = subject_of(tenant_id, user_id)
        stored = self._read(subject)
        if stored is None:
            with self._locked():
                stored = self._read(subject)
                if stored is None:
                    key_id = os.urandom(KEY_ID_BYTES)
                    wrapped = self.ring.new_user_key(self.active_kek, subject, key_id)
                    path = self._path(subject)
                    path.parent.mkdir(mode=0o700, exist_ok=True)
                    _put(path, key_id + wrapped)
                    stored = (key_id, wrapped)
        return user_key_ref(subject, stored[0])

    def destroy(self, tenant_id: str, user_id: str) -> bool:
        """Destroys the user's key; False when it had none. The bytes are overwritten before the
        file goes (what a file system or disk keeps of old blocks is beyond reach: docs/security.md)."""
        subject = subject_of(tenant_id, user_id)
        path = self._path(subject)
        with self._locked():
            stored = self._read(subject)
            if stored is None:
                return False
            with open(path, "r+b") as f:
                f.write(b"\0" * len(stored[0] + stored[1]))
                f.flush()
                os.fsync(f.fileno())
            path.unlink()
            _sync_dir(path.parent)
        self.ring.drop_user_key(user_key_ref(subject, stored[0]))
        return True

    def kek_ids(self) -> dict[str, int]:
        """Users' keys per KEK that wraps them."""
        out: dict[str, int] = {}
        for _, _, wrapped in self._all():
            kek = describe(wrapped).kek_id
            out[kek] = out.get(kek, 0) + 1
        return out

    def rewrap(self) -> int:
        """Every user key not wrapped by the active KEK re-wrapped by it; returns how many."""
        done = 0
        with self._locked():
            for path, key_id, wrapped in self._all():
                if describe(wrapped).kek_id == self.active_kek:
                    continue
                _put(path, key_id + self.ring.rewrap_user_key(wrapped, path.name, key_id, self.active_kek))
                done += 1
        return done

    def _all(self) -> Iterator[tuple[Path, bytes, bytes]]:
        for sub in sorted(self.folder.iterdir()) if self.folder.exists() else []:
            if not sub.is_dir():
                continue
            for path in sorted(sub.iterdir()):
                if path.name.startswith("."):
                    continue
                data = path.read_bytes()
                yield path, data[:KEY_ID_BYTES], data[KEY_ID_BYTES:]

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.folder / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock


def _put(path: Path, data: bytes) -> None:
    """Written whole under another name, synced, renamed, and the folder synced: a key that a
    committed row names outlives a crash, and a crash never leaves half a key."""
    partial = path.with_name(f".{path.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(partial, path)
    _sync_dir(path.parent)


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Sealing:
    """The keys a write seals under: the tenant's current data key (None: in clear), and, where a
    memory names its user and users' keys are kept, that user's key."""

    tenant: bytes | None
    users: UserKeyFiles | None = None

    async def for_users(self, tenant_id: str, user_ids: Iterable[str | None]) -> dict[str, bytes]:
        """The users' current key references (made where missing), read in a thread."""
        files = self.users
        wanted = sorted({u for u in user_ids if u})
        if files is None or not wanted:
            return {}
        return await asyncio.to_thread(lambda: {u: files.current(tenant_id, u) for u in wanted})
