"""The panel's sessions and its sign-in redirect target, without a server."""
from __future__ import annotations

import pytest

from memplane.panel.auth import safe_next
from memplane.panel.sessions import SessionStore


class Clock:
    """Time that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_idles_out_but_each_request_restarts_its_idle_time():
    clock = Clock()
    store = SessionStore(idle_seconds=60, clock=clock)
    session = store.create("mpk_abc_secret", "")
    clock.now += 50
    assert store.get(session.id) is session
    clock.now += 50
    assert store.get(session.id) is session  # 100 s old, but 50 s idle
    clock.now += 61
    assert store.get(session.id) is None and not store.alive(session.id)


def test_sessions_are_unguessable_and_hold_their_own_key_and_csrf_token():
    store = SessionStore()
    first, second = store.create("mpk_a_one", ""), store.create("mpk_b_two", "a1")
    assert len({first.id, second.id, first.csrf_token, second.csrf_token}) == 4
    assert len(first.id) >= 40 and len(first.csrf_token) >= 40
    assert (store.get(second.id).api_key, store.get(second.id).agent_id) == ("mpk_b_two", "a1")
    assert "mpk_a_one" not in repr(first) and first.csrf_token not in repr(first)


def test_a_dropped_session_is_gone():
    store = SessionStore()
    session = store.create("mpk_a_one", "")
    store.drop(session.id)
    assert store.get(session.id) is None


def test_the_key_label_shows_the_public_id_never_the_secret():
    assert SessionStore().create("mpk_9d6bb4d5_GcXk1WVM", "").key_label == "mpk_9d6bb4d5"
    assert SessionStore().create("not-a-panel-key", "").key_label == "key"


@pytest.mark.parametrize("target, expected", [
    ("/search?q=x", "/search?q=x"),
    ("https://evil.example/", "/memories"),
    ("//evil.example/", "/memories"),
    ("/\\evil.example", "/memories"),
    ("", "/memories"),
])
def test_after_sign_in_the_panel_goes_only_to_its_own_pages(target, expected):
    assert safe_next(target) == expected
