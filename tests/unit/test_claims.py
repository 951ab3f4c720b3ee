"""Claim: whether one memory's text says all another's does (near-duplicate merging)."""
from __future__ import annotations

import pytest

from memplane_server.core.write.observations import claim


@pytest.mark.parametrize("new, old", [
    ("User likes tea.", "The user likes tea"),
    ("Deploys need a change ticket", "Deploys need a change ticket first"),
    ("用户喜欢喝茶", "用户喜欢喝茶。"),
])
def test_a_text_with_no_term_of_its_own_adds_nothing(new, old):
    assert claim(new).adds_nothing_to(claim(old))


@pytest.mark.parametrize("new, old", [
    ("User prefers light mode", "User prefers dark mode"),
    ("Python 3.12 is required", "Python 3.11 is required"),
    ("Deploys need a change ticket first", "Deploys need a change ticket"),
    ("用户喜欢喝咖啡", "用户喜欢喝茶"),
])
def test_a_text_with_a_term_of_its_own_adds_something(new, old):
    assert not claim(new).adds_nothing_to(claim(old))


@pytest.mark.parametrize("negated, plain", [
    ("User does not like tea", "User likes tea"),
    ("User doesn’t eat meat", "User eats meat"),
    ("The user never flies", "The user flies"),
    ("用户不喜欢喝茶", "用户喜欢喝茶"),
])
def test_a_negation_is_no_restatement_either_way(negated, plain):
    assert not claim(negated).adds_nothing_to(claim(plain))
    assert not claim(plain).adds_nothing_to(claim(negated))
