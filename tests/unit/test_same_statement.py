"""statement_key: which two texts state the same thing, so a write may merge one into the other.
A wrong merge loses a fact; a missed merge costs a row: the rule errs toward keeping both."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memplane_server.core.write.observations import same_statement, sameness
from tests.support.meaning_pairs import REPEATS, changed_pairs, repeats

PAIRS = changed_pairs()


def test_the_generated_pairs_are_hundreds_in_both_languages():
    assert len(PAIRS) >= 500
    assert sum(any("\u4e00" <= c <= "\u9fff" for c in a) for a, _ in PAIRS) >= 150


def test_no_pair_that_swaps_one_meaning_bearing_word_states_the_same():
    merged = [(a, b) for a, b in PAIRS if same_statement(a, b)]
    assert merged == []


def test_every_true_repeat_states_the_same():
    texts = sorted({t for pair in PAIRS for t in pair})
    missed = [(t, r, how) for t, r, how in repeats(texts) if not same_statement(t, r)]
    assert missed == []


@given(pair=st.sampled_from(PAIRS), how=st.sampled_from(sorted(REPEATS)))
def test_a_repeat_of_one_side_still_differs_from_the_other(pair, how):
    a, b = pair
    assert not same_statement(REPEATS[how](a), b)


@pytest.mark.parametrize("stored, written", [
    ("Turn the alarm on at night", "Turn the alarm off at night"),
    ("Refunds over 100 dollars need approval", "Refunds under 100 dollars need approval"),
    ("The user moved to Berlin", "The user moved from Berlin"),
    ("Deploys need a change ticket", "Deploys need a change ticket first"),
    ("The user likes tea", "User likes tea"),
    ("The price is 3.5 dollars", "The price is 35 dollars"),
    ("The budget is 1,000 dollars", "The budget is 1000 dollars"),
    ("Is the user vegan?", "Is the user vegan"),
    ("用户喜欢喝茶", "用户不喜欢喝茶"),
])
def test_texts_that_differ_in_any_word_or_mark_are_kept_apart(stored, written):
    assert not same_statement(stored, written)


@pytest.mark.parametrize("stored, written", [
    ("User doesn’t eat meat", "User doesn't eat meat"),
    ("Office closes at 6pm", "office closes at 6pm."),
    ("Hello, world", "Hello , world"),
    ("用户 喜欢 喝茶", "用户喜欢喝茶。"),
    ("预算是１００元", "预算是100元"),
])
def test_quotes_spacing_and_full_width_forms_do_not_count(stored, written):
    assert same_statement(stored, written)


def test_the_reason_says_whether_the_text_was_the_same():
    assert sameness("Likes tea", "Likes tea") == "the same text"
    assert "case" in sameness("Likes tea", "likes tea.")
