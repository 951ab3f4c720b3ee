"""API key format and hashing: `mpk_<id>_<secret>`; only a hash of the secret is stored."""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets

PREFIX = "mpk"


def new_key() -> tuple[str, str, bytes]:
    """(key id, full secret to hand out once, hash to store)."""
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    return key_id, f"{PREFIX}_{key_id}_{secret}", hash_secret(secret)


def hash_secret(secret: str) -> bytes:
    # The secret is 256 random bits, so a fast hash is enough: there is nothing to brute-force.
    return hashlib.sha256(secret.encode()).digest()


_KEY_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")


def is_key_id(value: str) -> bool:
    """Whether value could be a key id (16 hex digits today; a little wider to stay readable)."""
    return bool(_KEY_ID.fullmatch(value))


def split_key(presented: str) -> tuple[str, str] | None:
    parts = presented.split("_", 2)
    if len(parts) != 3 or parts[0] != PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


def secret_matches(secret: str, stored_hash: bytes) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_hash)
