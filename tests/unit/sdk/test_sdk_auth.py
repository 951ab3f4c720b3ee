"""Authentication metadata sent with every call."""
from __future__ import annotations

import pytest

from memplane._auth import auth_metadata


def test_api_key_is_sent_as_a_bearer_token():
    assert auth_metadata("mp_secret") == (("authorization", "Bearer mp_secret"),)


def test_agent_id_adds_the_agent_header():
    assert ("x-memplane-agent", "planner") in auth_metadata("mp_secret", "planner")


def test_surrounding_whitespace_of_the_key_is_dropped():
    assert auth_metadata(" mp_secret\n") == (("authorization", "Bearer mp_secret"),)


@pytest.mark.parametrize("key", ["", "  \n", None])
def test_missing_key_is_rejected(key):
    with pytest.raises(ValueError):
        auth_metadata(key)


def test_blank_agent_id_is_rejected():
    with pytest.raises(ValueError):
        auth_metadata("mp_secret", " ")
