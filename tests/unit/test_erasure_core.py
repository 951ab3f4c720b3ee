"""Erasure and forget rules that need no database: which filters select everything, the receipt's
subject and its JSON form, who erases tenant-wide, and which words of a reason are the user id."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.forget.erasure import (
    Receipt,
    receipt_from_json,
    receipt_to_json,
    redact_words,
    subject_of,
    tenant_wide,
)
from memplane_server.core.model import Kind, Layer, MemoryFilter, Scope, Status


@pytest.mark.parametrize("f", [
    MemoryFilter(), MemoryFilter(include_pending=True), MemoryFilter(min_confidence=0.0),
    MemoryFilter(statuses=tuple(Status)), MemoryFilter(scopes=tuple(Scope)), MemoryFilter(kinds=tuple(Kind)),
    MemoryFilter(layers=(Layer.EPISODIC, Layer.SEMANTIC, Layer.PROCEDURAL)),
    MemoryFilter(include_pending=True, statuses=tuple(Status), scopes=tuple(Scope)),
])
def test_filters_that_leave_nothing_out_do_not_narrow(f):
    assert not f.narrows()


@pytest.mark.parametrize("f", [
    MemoryFilter(user_id="u1"), MemoryFilter(min_confidence=0.5), MemoryFilter(statuses=(Status.DELETED,)),
    MemoryFilter(scopes=(Scope.GLOBAL,)), MemoryFilter(kinds=(Kind.FACT,)), MemoryFilter(tags=("x",)),
    MemoryFilter(include_pending=True, session_id="s"),
])
def test_filters_with_a_real_condition_narrow(f):
    assert f.narrows()


def test_the_subject_names_the_user_only_to_who_knows_them():
    subject = subject_of("t1", "u-42")
    assert len(subject) == 64 and "u-42" not in subject
    assert subject != subject_of("t2", "u-42") and subject != subject_of("t1", "u-43")
    assert subject_of("t1", "u") != subject_of("t1u", "")  # the separator keeps tenant and user apart


def test_a_receipt_survives_its_json_form():
    r = Receipt("op", datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), "abc",
                {"postgres.memories": 3, "postgres.derived_memories": 1}, dry_run=True)
    assert receipt_from_json(receipt_to_json(r)) == r and r.memories == 4


def test_only_a_tenant_admin_erases_tenant_wide():
    roles = {role: tenant_wide(Caller("k", role, "t", None)) for role in Role}
    assert roles == {role: role is Role.TENANT_ADMIN for role in Role}


def test_only_the_user_id_as_a_word_of_its_own_is_redacted():
    assert redact_words("asked by al. (not alice, kal-el, al@x.org or al.b)", "al") == \
        "asked by [erased]. (not alice, kal-el, al@x.org or al.b)"


def test_a_user_id_with_regex_characters_is_matched_literally():
    assert redact_words("erase u+1 and u11", "u+1") == "erase [erased] and u11"
