"""A forget by filter is cut into batches between sessions (services/forget/service.py session_batches): a
session split across two would have its summary erased and rebuilt in between."""
from __future__ import annotations

from uuid import uuid4

from memplane_server.services.forget.service import session_batches


def rows(session: str | None, n: int) -> list:
    return [(uuid4(), ("t", session)) for _ in range(n)]


def test_a_session_is_never_split_when_it_fits_in_a_batch():
    a, b, c = rows("a", 3), rows("b", 3), rows("c", 2)
    batches = session_batches(a + b + c, 5)
    assert batches == [[i for i, _ in a], [i for i, _ in b + c]]


def test_a_session_bigger_than_a_batch_and_memories_without_one_are_cut_to_size():
    a, loose, b = rows("a", 1), rows(None, 7), rows("b", 2)
    batches = session_batches(a + loose + b, 3)
    ids = [i for i, _ in loose]
    assert batches == [[a[0][0]], ids[:3], ids[3:6], ids[6:], [i for i, _ in b]]
    assert all(len(batch) <= 3 for batch in batches)
