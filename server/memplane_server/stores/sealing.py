"""Encryption at rest: the texts of a memory (content, context, value, metadata) are sealed with
AES-256-GCM under a data key of its tenant before they reach PostgreSQL or Redis, and opened when
read back. Data keys are random, one current per tenant (rotation adds a version), and stored only
wrapped (AES-GCM) by a key-encryption key (KEK) from the settings or a file, never in clear.

Each sealed row carries the wrapped data key it was sealed under (`sealed_key`), so opening a row
needs only the KEK that key names: no lookup, no wait, also for a domain memory of another tenant
or a row sealed by another server. A KEK rotation re-wraps those keys (no text is re-encrypted); a
data-key rotation re-seals the rows, which stay readable under either key meanwhile.

Every process holds the KEKs it was given in one registry (OPENERS): rows are opened wherever they
are read (a search's candidates, a history snapshot, a working-memory item) by the KEK their key
names. Empty texts and missing values stay as they are: whether a memory has a context is visible.

A memory about a user (its user_id) is sealed under a key of that user instead, kept outside the
database (stores/user_keys.py) so that erasing the user can destroy it: its `sealed_key` then names
the user (a hash) and the key's id, not a wrapped key. What was sealed under a destroyed key opens
as nothing, the way an erased memory reads (docs/security.md, crypto-shredding).
"""
from __future__ import annotations

import base64
import json
import os
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_WRAP_FORMAT = 1
_USER_FORMAT = 2
SUBJECT_BYTES = 32
KEY_ID_BYTES = 16
_NONCE = 12
SEALED_JSON = "$sealed"
# Sealed bytes start with a NUL, which no serialized response does (a protobuf field tag is never 0).
SEALED_BYTES = b"\x00mp1"


class SealError(Exception):
    """A sealed value cannot be opened: its KEK is not among this process's, or it was altered."""


class Shredded(SealError):
    """Sealed under a user's key that was destroyed: the user was erased."""


@dataclass(frozen=True)
class Kek:
    id: str
    key: bytes


def parse_keks(text: str) -> list[Kek]:
    """`id:base64key` entries separated by commas or lines, the first the active one."""
    keks = []
    for entry in text.replace("\n", ",").split(","):
        entry = entry.strip()
        if not entry or entry.startswith("#"):
            continue
        kek_id, sep, encoded = entry.partition(":")
        try:
            key = base64.b64decode(encoded, validate=True) if sep else b""
        except ValueError:
            key = b""
        if not kek_id or len(key) != 32 or len(kek_id.encode()) > 64:
            raise ValueError(f"a key-encryption key is `id:base64` of 32 bytes (id at most 64 bytes); got {kek_id!r}")
        keks.append(Kek(kek_id, key))
    if len({k.id for k in keks}) != len(keks):
        raise ValueError("two key-encryption keys have the same id")
    return keks


def new_kek_line(kek_id: str) -> str:
    return f"{kek_id}:{base64.b64encode(os.urandom(32)).decode()}"


@dataclass(frozen=True)
class WrappedKey:
    """A tenant's data key as stored: which KEK wrapped it, which version it is, the wrapped bytes."""

    kek_id: str
    version: int
    blob: bytes


def user_key_ref(subject: str, key_id: bytes) -> bytes:
    """What a row sealed under a user's key carries: the user (sha256 of tenant and user id, as an
    erasure receipt names it) and which of that user's keys, never the key."""
    return bytes([_USER_FORMAT]) + bytes.fromhex(subject) + key_id


def is_user_key_ref(blob: bytes | None) -> bool:
    return bool(blob) and blob[0] == _USER_FORMAT  # type: ignore[index]


def user_key_parts(ref: bytes) -> tuple[str, bytes]:
    """The subject (hex) and key id a user key reference names."""
    if len(ref) != 1 + SUBJECT_BYTES + KEY_ID_BYTES or not is_user_key_ref(ref):
        raise SealError("not a user key reference")
    return ref[1:1 + SUBJECT_BYTES].hex(), ref[1 + SUBJECT_BYTES:]


def describe(blob: bytes) -> WrappedKey:
    if not blob or blob[0] != _WRAP_FORMAT:
        raise SealError("not a wrapped data key")
    size = blob[1]
    kek_id = blob[2:2 + size].decode()
    (version,) = struct.unpack(">I", blob[2 + size:6 + size])
    return WrappedKey(kek_id, version, blob)


def _wrap_aad(tenant_id: str, version: int) -> bytes:
    return f"memplane data key\x1f{tenant_id}\x1f{version}".encode()


def _user_wrap_aad(subject: str, key_id: bytes) -> bytes:
    return f"memplane user key\x1f{subject}\x1f{key_id.hex()}".encode()


class UserKeySource(Protocol):
    """Where users' keys are kept (stores/user_keys.py): read here, on a row's first opening."""

    def read(self, ref: bytes) -> bytes | None:
        """The wrapped key a reference names; None once it was destroyed."""


def _field_aad(tenant_id: str, field: str) -> bytes:
    # Bound to the tenant and the field: a ciphertext copied into another tenant's row, or from
    # content into value, does not open.
    return f"{tenant_id}\x1f{field}".encode()


class Keyring:
    """The KEKs of one process, and the data keys it has unwrapped (by their wrapped bytes)."""

    def __init__(self) -> None:
        self.keks: dict[str, AESGCM] = {}
        self._opened: dict[bytes, AESGCM] = {}
        # Users' keys: read from `user_keys` on first use and held user_key_seconds, so that a key
        # another server destroyed (an erasure) leaves this one's memory within that time.
        self.user_keys: UserKeySource | None = None
        self.user_key_seconds = 60.0
        self._users: dict[bytes, tuple[float, AESGCM]] = {}

    def add(self, keks: Iterable[Kek]) -> None:
        for kek in keks:
            self.keks.setdefault(kek.id, AESGCM(kek.key))

    def _wrap(self, kek_id: str, version: int, key: bytes, aad: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        head = bytes([_WRAP_FORMAT, len(kek_id.encode())]) + kek_id.encode() + struct.pack(">I", version)
        return head + nonce + self.keks[kek_id].encrypt(nonce, key, aad)

    def _unwrap(self, blob: bytes, aad: bytes, whose: str) -> bytes:
        info = describe(blob)
        kek = self.keks.get(info.kek_id)
        if kek is None:
            raise SealError(f"data key wrapped by key-encryption key {info.kek_id!r}, which this server lacks")
        start = 6 + len(info.kek_id.encode())
        try:
            return kek.decrypt(blob[start:start + _NONCE], blob[start + _NONCE:], aad)
        except Exception:
            raise SealError(f"the data key of {whose} does not open: altered, or another's") from None

    def wrap(self, kek_id: str, tenant_id: str, version: int, data_key: bytes) -> bytes:
        return self._wrap(kek_id, version, data_key, _wrap_aad(tenant_id, version))

    def new_data_key(self, kek_id: str, tenant_id: str, version: int) -> bytes:
        return self.wrap(kek_id, tenant_id, version, AESGCM.generate_key(bit_length=256))

    def unwrap(self, blob: bytes, tenant_id: str) -> bytes:
        return self._unwrap(blob, _wrap_aad(tenant_id, describe(blob).version), f"tenant {tenant_id!r}")

    def rewrap(self, blob: bytes, tenant_id: str, kek_id: str) -> bytes:
        return self.wrap(kek_id, tenant_id, describe(blob).version, self.unwrap(blob, tenant_id))

    def new_user_key(self, kek_id: str, subject: str, key_id: bytes) -> bytes:
        """A new user key, wrapped by the KEK kek_id, bound to its user and id."""
        return self._wrap(kek_id, 0, AESGCM.generate_key(bit_length=256), _user_wrap_aad(subject, key_id))

    def rewrap_user_key(self, wrapped: bytes, subject: str, key_id: bytes, kek_id: str) -> bytes:
        aad = _user_wrap_aad(subject, key_id)
        return self._wrap(kek_id, 0, self._unwrap(wrapped, aad, "a user"), aad)

    def _aead(self, blob: bytes, tenant_id: str) -> AESGCM:
        if blob[0] == _USER_FORMAT:
            return self._user_aead(blob)
        aead = self._opened.get(blob)
        if aead is None:
            aead = self._opened[blob] = AESGCM(self.unwrap(blob, tenant_id))
        return aead

    def _user_aead(self, ref: bytes) -> AESGCM:
        held = self._users.get(ref)
        now = time.monotonic()
        if held is not None and now - held[0] < self.user_key_seconds:
            return held[1]
        if self.user_keys is None:
            raise SealError("sealed under a user's key, and this process has no user key store (MEMPLANE_USER_KEYS_DIR)")
        # A small local file, read once per user per user_key_seconds: cheaper than the hop to a
        # thread, and it keeps every place that opens a row synchronous.
        wrapped = self.user_keys.read(ref)
        if wrapped is None:
            self._users.pop(ref, None)
            raise Shredded("sealed under the key of an erased user")
        subject, key_id = user_key_parts(ref)
        aead = AESGCM(self._unwrap(wrapped, _user_wrap_aad(subject, key_id), "a user"))
        self._users[ref] = (now, aead)
        return aead

    def drop_user_key(self, ref: bytes) -> None:
        self._users.pop(ref, None)

    def seal_text(self, blob: bytes, tenant_id: str, field: str, text: str) -> str:
        nonce = os.urandom(_NONCE)
        sealed = self._aead(blob, tenant_id).encrypt(nonce, text.encode(), _field_aad(tenant_id, field))
        return base64.b64encode(nonce + sealed).decode()

    def open_text(self, blob: bytes, tenant_id: str, field: str, sealed: str) -> str:
        raw = base64.b64decode(sealed)
        try:
            return self._aead(blob, tenant_id).decrypt(raw[:_NONCE], raw[_NONCE:], _field_aad(tenant_id, field)).decode()
        except SealError:
            raise
        except Exception:
            raise SealError(f"a sealed {field} of tenant {tenant_id!r} does not open: altered or moved") from None

    def seal_bytes(self, blob: bytes, tenant_id: str, field: str, data: bytes) -> bytes:
        """Bytes sealed with the key they need to open named in front: a cached response stands alone."""
        nonce = os.urandom(_NONCE)
        sealed = self._aead(blob, tenant_id).encrypt(nonce, data, _field_aad(tenant_id, field))
        return SEALED_BYTES + struct.pack(">H", len(blob)) + blob + nonce + sealed

    def open_bytes(self, tenant_id: str, field: str, data: bytes) -> bytes:
        if not data.startswith(SEALED_BYTES):
            return data
        start = len(SEALED_BYTES)
        (size,) = struct.unpack(">H", data[start:start + 2])
        blob = data[start + 2:start + 2 + size]
        rest = data[start + 2 + size:]
        try:
            return self._aead(blob, tenant_id).decrypt(rest[:_NONCE], rest[_NONCE:], _field_aad(tenant_id, field))
        except SealError:
            raise
        except Exception:
            raise SealError(f"a sealed {field} of tenant {tenant_id!r} does not open: altered or moved") from None

    def seal_json(self, blob: bytes, tenant_id: str, field: str, value: Any) -> dict[str, str]:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return {SEALED_JSON: self.seal_text(blob, tenant_id, field, text)}

    def open_json(self, blob: bytes, tenant_id: str, field: str, value: Any) -> Any:
        return json.loads(self.open_text(blob, tenant_id, field, value[SEALED_JSON]))


# The KEKs of every runtime in this process: rows are opened where they are read, which is many
# places below any one store.
OPENERS = Keyring()


@dataclass(frozen=True)
class Texts:
    """The four texts of a memory, as stored or as read."""

    content: str
    context: str
    value: str | None
    metadata: Any


def seal(blob: bytes | None, tenant_id: str, texts: Texts) -> Texts:
    """The texts as stored: sealed under the data key `blob`, or as they are when there is none."""
    if blob is None:
        return texts
    ring = OPENERS
    return Texts(
        ring.seal_text(blob, tenant_id, "content", texts.content),
        ring.seal_text(blob, tenant_id, "context", texts.context) if texts.context else texts.context,
        ring.seal_text(blob, tenant_id, "value", texts.value) if texts.value else texts.value,
        ring.seal_json(blob, tenant_id, "metadata", texts.metadata) if texts.metadata else texts.metadata,
    )


ERASED = Texts("", "", None, {})


def open_texts(blob: bytes | None, tenant_id: str, texts: Texts) -> Texts:
    """The texts in clear; those of an erased user (its key destroyed) as empty."""
    if blob is None:
        return texts
    try:
        return open_sealed_texts(blob, tenant_id, texts)
    except Shredded:
        return ERASED


def open_sealed_texts(blob: bytes, tenant_id: str, texts: Texts) -> Texts:
    """As open_texts, but an erased user's texts raise Shredded."""
    ring = OPENERS
    return Texts(
        ring.open_text(blob, tenant_id, "content", texts.content),
        ring.open_text(blob, tenant_id, "context", texts.context) if texts.context else texts.context,
        ring.open_text(blob, tenant_id, "value", texts.value) if texts.value else texts.value,
        ring.open_json(blob, tenant_id, "metadata", texts.metadata) if texts.metadata else texts.metadata,
    )


def key_from_json(value: Any) -> bytes | None:
    """A sealed_key as a JSON document holds it: base64 where the server wrote the snapshot,
    PostgreSQL's hex (`\\x...`) where a trigger did (to_jsonb of the row)."""
    if not value:
        return None
    if isinstance(value, bytes):
        return value
    if value.startswith("\\x"):
        return bytes.fromhex(value[2:])
    return base64.b64decode(value)


def key_forms(blob: bytes) -> list[str]:
    """Both ways a JSON document may hold this key (key_from_json)."""
    return [base64.b64encode(blob).decode(), "\\x" + blob.hex()]


def open_text(blob: bytes | None, tenant_id: str, field: str, text: str) -> str:
    """One text in clear; an erased user's as empty."""
    if blob is None or not text:
        return text
    try:
        return OPENERS.open_text(blob, tenant_id, field, text)
    except Shredded:
        return ""
