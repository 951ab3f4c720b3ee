"""Encryption at rest without I/O: key-encryption keys parse strictly, a data key opens only under
its tenant and KEK, sealed texts open only in their tenant and field, re-wrapping keeps what a
sealed text says, and a history snapshot round-trips sealed."""
from __future__ import annotations

import base64
import os
import uuid

import pytest

from memplane_server.core.model import Kind, Layer, Scope, Status
from memplane_server.stores.postgres.sql import record_from_row, record_to_json
from memplane_server.stores.sealing import (
    OPENERS,
    Kek,
    Keyring,
    SealError,
    Shredded,
    Texts,
    describe,
    is_user_key_ref,
    new_kek_line,
    open_texts,
    parse_keks,
    seal,
    user_key_parts,
    user_key_ref,
)
from tests.unit.test_stored_rows import record

KEK = parse_keks(new_kek_line("unit-1"))[0]
OPENERS.add([KEK])


def test_keks_parse_from_commas_or_lines_with_the_first_active():
    line_a, line_b = new_kek_line("a"), new_kek_line("b")
    assert [k.id for k in parse_keks(f"{line_a},{line_b}")] == ["a", "b"]
    assert [k.id for k in parse_keks(f"# rotated 2026-12\n{line_b}\n{line_a}\n")] == ["b", "a"]


FIXED_KEY = base64.b64encode(bytes(range(32))).decode()


@pytest.mark.parametrize("text", ["k1", "k1:notbase64!", "k1:" + base64.b64encode(b"short").decode(),
                                  f"dup:{FIXED_KEY},dup:{FIXED_KEY}"])
def test_a_malformed_or_repeated_kek_is_refused(text):
    with pytest.raises(ValueError):
        parse_keks(text)


def test_a_wrapped_data_key_names_its_kek_and_version_and_opens_only_for_its_tenant():
    blob = OPENERS.new_data_key("unit-1", "acme", 3)
    assert (describe(blob).kek_id, describe(blob).version) == ("unit-1", 3)
    assert len(OPENERS.unwrap(blob, "acme")) == 32
    with pytest.raises(SealError):
        OPENERS.unwrap(blob, "globex")


def test_a_server_without_the_kek_cannot_open_the_data_key():
    blob = OPENERS.new_data_key("unit-1", "acme", 1)
    with pytest.raises(SealError, match="lacks"):
        Keyring().unwrap(blob, "acme")


def test_sealed_texts_open_back_and_hide_what_they_say():
    blob = OPENERS.new_data_key("unit-1", "acme", 1)
    texts = Texts("the door code is 4711", "at the office", "4711", {"floor": 3})
    sealed = seal(blob, "acme", texts)
    assert "4711" not in repr(sealed) and "office" not in repr(sealed)
    assert open_texts(blob, "acme", sealed) == texts


def test_empty_texts_and_missing_values_stay_as_they_are():
    blob = OPENERS.new_data_key("unit-1", "acme", 1)
    sealed = seal(blob, "acme", Texts("x", "", None, {}))
    assert (sealed.context, sealed.value, sealed.metadata) == ("", None, {})


def test_a_sealed_text_moved_to_another_field_or_tenant_does_not_open():
    blob = OPENERS.new_data_key("unit-1", "acme", 1)
    sealed = seal(blob, "acme", Texts("secret", "", "v", {}))
    with pytest.raises(SealError):
        open_texts(blob, "acme", Texts(sealed.value, "", None, {}))  # value's ciphertext as content
    other = OPENERS.new_data_key("unit-1", "globex", 1)
    with pytest.raises(SealError):
        open_texts(other, "globex", Texts(sealed.content, "", None, {}))


def test_rewrapping_under_another_kek_keeps_every_sealed_text_readable():
    second = parse_keks(new_kek_line("unit-2"))[0]
    OPENERS.add([second])
    blob = OPENERS.new_data_key("unit-1", "acme", 1)
    sealed = seal(blob, "acme", Texts("still here", "", None, {}))
    rewrapped = OPENERS.rewrap(blob, "acme", "unit-2")
    assert describe(rewrapped).kek_id == "unit-2"
    only_new = Keyring()
    only_new.add([second])
    assert only_new.open_text(rewrapped, "acme", "content", sealed.content) == "still here"


def test_sealed_bytes_name_their_key_and_plain_bytes_pass_through():
    blob = OPENERS.new_data_key("unit-1", "acme", 1)
    response = b"\n\x24" + os.urandom(40)
    assert OPENERS.open_bytes("acme", "response", OPENERS.seal_bytes(blob, "acme", "response", response)) == response
    assert OPENERS.open_bytes("acme", "response", response) == response


def test_a_history_snapshot_is_sealed_as_its_memory_and_reads_back_whole():
    blob = OPENERS.new_data_key("unit-1", "acme", 1)
    memory = record(id=uuid.uuid4(), tenant_id="acme", scope=Scope.GLOBAL, layer=Layer.SEMANTIC, kind=Kind.FACT,
                    content="the user lives in Hangzhou", value="Hangzhou", metadata={"source": "chat"},
                    status=Status.ACTIVE, sealed_with=blob)
    snapshot = record_to_json(memory)
    assert "Hangzhou" not in repr(snapshot) and "chat" not in repr(snapshot)
    back = record_from_row(snapshot)
    assert (back.content, back.value, back.metadata, back.sealed_with) == (
        memory.content, memory.value, memory.metadata, blob)


class HeldUserKeys:
    """Users' keys held in a dict, as the key folder holds them in files (stores/user_keys.py)."""

    def __init__(self, ring: Keyring, kek_id: str) -> None:
        self.ring, self.kek_id, self.wrapped = ring, kek_id, {}

    def make(self, subject: str) -> bytes:
        key_id = os.urandom(16)
        self.wrapped[(subject, key_id)] = self.ring.new_user_key(self.kek_id, subject, key_id)
        return user_key_ref(subject, key_id)

    def read(self, ref: bytes) -> bytes | None:
        return self.wrapped.get(user_key_parts(ref))


def test_a_user_key_reference_names_the_user_and_the_key_never_the_key():
    subject = "ab" * 32
    ref = user_key_ref(subject, b"\x01" * 16)
    assert is_user_key_ref(ref) and not is_user_key_ref(b"\x01rest") and not is_user_key_ref(None)
    assert user_key_parts(ref) == (subject, b"\x01" * 16) and len(ref) == 49


def test_texts_under_a_user_key_open_until_it_is_destroyed_and_then_read_as_erased():
    ring = Keyring()
    ring.add([Kek("k1", os.urandom(32))])
    ring.user_key_seconds = 0  # read the key again on every opening, as once the cache has passed
    users = ring.user_keys = HeldUserKeys(ring, "k1")
    ref = users.make("cd" * 32)
    sealed = ring.seal_text(ref, "t1", "content", "the user's address")
    assert ring.open_text(ref, "t1", "content", sealed) == "the user's address"

    users.wrapped.clear()

    with pytest.raises(Shredded):
        ring.open_text(ref, "t1", "content", sealed)
    with pytest.raises(Shredded):
        ring.seal_text(ref, "t1", "content", "written after the erasure")


def test_a_user_key_does_not_open_as_another_users():
    ring = Keyring()
    ring.add([Kek("k1", os.urandom(32))])
    users = ring.user_keys = HeldUserKeys(ring, "k1")
    ref = users.make("ef" * 32)
    wrapped = users.wrapped.pop(user_key_parts(ref))
    other = user_key_ref("0f" * 32, user_key_parts(ref)[1])
    users.wrapped[user_key_parts(other)] = wrapped  # the same wrapped key filed under another user
    with pytest.raises(SealError):
        ring.seal_text(other, "t1", "content", "x")
