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
"""
from __future__ import annotations

import base64
import json
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_WRAP_FORMAT = 1
_NONCE = 12
SEALED_JSON = "$sealed"
# Sealed bytes start with a NUL, which no serialized response does (a protobuf field tag is never 0).
SEALED_BYTES = b"\x00mp1"


class SealError(Exception):
    """A sealed value cannot be opened: its KEK is not among this process's, or it was altered."""


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


def describe(blob: bytes) -> WrappedKey:
    if not blob or blob[0] != _WRAP_FORMAT:
        raise SealError("not a wrapped data key")
    size = blob[1]
    kek_id = blob[2:2 + size].decode()
    (version,) = struct.unpack(">I", blob[2 + size:6 + size])
    return WrappedKey(kek_id, version, blob)


def _wrap_aad(tenant_id: str, version: int) -> bytes:
    return f"memplane data key\x1f{tenant_id}\x1f{version}".encode()


def _field_aad(tenant_id: str, field: str) -> bytes:
    # Bound to the tenant and the field: a ciphertext copied into another tenant's row, or from
    # content into value, does not open.
    return f"{tenant_id}\x1f{field}".encode()


class Keyring:
    """The KEKs of one process, and the data keys it has unwrapped (by their wrapped bytes)."""

    def __init__(self) -> None:
        self.keks: dict[str, AESGCM] = {}
        self._opened: dict[bytes, AESGCM] = {}

    def add(self, keks: Iterable[Kek]) -> None:
        for kek in keks:
            self.keks.setdefault(kek.id, AESGCM(kek.key))

    def wrap(self, kek_id: str, tenant_id: str, version: int, data_key: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        head = bytes([_WRAP_FORMAT, len(kek_id.encode())]) + kek_id.encode() + struct.pack(">I", version)
        return head + nonce + self.keks[kek_id].encrypt(nonce, data_key, _wrap_aad(tenant_id, version))

    def new_data_key(self, kek_id: str, tenant_id: str, version: int) -> bytes:
        return self.wrap(kek_id, tenant_id, version, AESGCM.generate_key(bit_length=256))

    def unwrap(self, blob: bytes, tenant_id: str) -> bytes:
        info = describe(blob)
        kek = self.keks.get(info.kek_id)
        if kek is None:
            raise SealError(f"data key wrapped by key-encryption key {info.kek_id!r}, which this server lacks")
        start = 6 + len(info.kek_id.encode())
        try:
            return kek.decrypt(blob[start:start + _NONCE], blob[start + _NONCE:], _wrap_aad(tenant_id, info.version))
        except Exception:
            raise SealError(f"the data key of tenant {tenant_id!r} does not open: altered, or another tenant's") from None

    def rewrap(self, blob: bytes, tenant_id: str, kek_id: str) -> bytes:
        return self.wrap(kek_id, tenant_id, describe(blob).version, self.unwrap(blob, tenant_id))

    def _aead(self, blob: bytes, tenant_id: str) -> AESGCM:
        aead = self._opened.get(blob)
        if aead is None:
            aead = self._opened[blob] = AESGCM(self.unwrap(blob, tenant_id))
        return aead

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


def open_texts(blob: bytes | None, tenant_id: str, texts: Texts) -> Texts:
    if blob is None:
        return texts
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
    return OPENERS.open_text(blob, tenant_id, field, text) if blob is not None and text else text
