"""Pseudo-relevance feedback math (core/retrieval/feedback.py)."""
import math

import numpy as np
import pytest

from memplane_server.core.retrieval.feedback import expansion_terms, rarity, rocchio


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_rocchio_moves_the_query_toward_the_feedback_centroid_at_unit_length():
    q, a, b = unit(1, 0, 0), unit(0, 1, 0), unit(0, 0, 1)
    moved = rocchio(q, [a, b], beta=1.0)
    expected = unit(1, 0.5, 0.5)
    assert np.allclose(moved, expected, atol=1e-6)
    assert math.isclose(float(np.linalg.norm(moved)), 1.0, rel_tol=1e-6)


def test_a_larger_beta_moves_the_query_further():
    q, a = unit(1, 0, 0), unit(0, 1, 0)
    assert float(rocchio(q, [a], 2.0) @ a) > float(rocchio(q, [a], 0.5) @ a)


@pytest.mark.parametrize("beta, feedback", [(0.0, [unit(0, 1)]), (1.0, [])])
def test_no_beta_or_no_feedback_leaves_the_query_as_it_is(beta, feedback):
    q = unit(1, 0)
    assert rocchio(q, feedback, beta) is q


def test_expansion_prefers_the_rarer_of_two_equally_frequent_terms():
    docs = [{"lake": 1, "trip": 1}]
    terms = expansion_terms(["camp"], docs, {"trip": 0.04}, count=2, max_share=0.05, unlisted_share=0.01)
    assert list(terms) == ["lake", "trip"]
    assert terms["lake"] == 1.0
    assert math.isclose(terms["trip"], rarity(0.04) / rarity(0.01))


def test_a_term_several_feedback_documents_share_outweighs_one_in_a_single_document():
    docs = [{"lake": 1, "boat": 1}, {"lake": 1, "tent": 1}]
    terms = expansion_terms([], docs, {}, count=3, max_share=0.05, unlisted_share=0.01)
    assert next(iter(terms)) == "lake" and terms["boat"] == terms["tent"] == 0.5


def test_query_terms_and_terms_too_common_to_match_are_not_expansions():
    docs = [{"camp": 3, "melanie": 2, "lake": 1}]
    terms = expansion_terms(["camp"], docs, {"melanie": 0.3}, count=5, max_share=0.05, unlisted_share=0.01)
    assert list(terms) == ["lake"]


def test_expansion_keeps_at_most_count_terms():
    docs = [{f"t{i}": 1 for i in range(10)}]
    assert len(expansion_terms([], docs, {}, count=3, max_share=0.05, unlisted_share=0.01)) == 3


def test_no_count_or_no_feedback_gives_no_expansion():
    assert expansion_terms(["a"], [{"b": 1}], {}, count=0, max_share=1, unlisted_share=0.01) == {}
    assert expansion_terms(["a"], [], {}, count=5, max_share=1, unlisted_share=0.01) == {}
