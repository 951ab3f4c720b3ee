"""API key format `mpk_<id>_<secret>` and secret hashing (core/access/keys.py)."""
from __future__ import annotations

import hashlib
import re

import pytest

from memplane_server.core.access.keys import PREFIX, hash_secret, new_key, secret_matches, split_key


def test_new_key_has_prefix_hex_id_and_secret():
    key_id, full, _ = new_key()
    assert re.fullmatch(r"[0-9a-f]{16}", key_id)
    assert full.startswith(f"{PREFIX}_{key_id}_")
    assert len(full) > len(f"{PREFIX}_{key_id}_") + 40


def test_new_key_splits_back_into_its_id_and_a_secret_matching_the_stored_hash():
    key_id, full, stored = new_key()
    parts = split_key(full)
    assert parts is not None
    assert parts[0] == key_id
    assert secret_matches(parts[1], stored)


def test_new_keys_are_unique():
    keys = {new_key()[1] for _ in range(20)}
    assert len(keys) == 20


def test_stored_hash_is_sha256_of_secret_not_the_secret():
    _, full, stored = new_key()
    secret = split_key(full)[1]
    assert stored == hashlib.sha256(secret.encode()).digest()
    assert secret.encode() not in stored


def test_split_key_keeps_underscores_in_the_secret():
    assert split_key("mpk_abc_se_cr_et") == ("abc", "se_cr_et")


@pytest.mark.parametrize(
    "presented", ["", "mpk", "mpk_abc", "mpk__secret", "mpk_abc_", "xyz_abc_secret", "MPK_abc_secret", "abc"]
)
def test_split_key_rejects_malformed_keys(presented):
    assert split_key(presented) is None


def test_secret_matches_only_the_right_secret():
    stored = hash_secret("s3cret")
    assert secret_matches("s3cret", stored)
    assert not secret_matches("s3cret ", stored)
    assert not secret_matches("", stored)
