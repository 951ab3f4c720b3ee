"""reciprocal_rank_fusion: score = sum over channels of weight / (k + rank), ranks 1-based."""
from __future__ import annotations

import pytest

from memplane_server.core.retrieval.fusion import RRF_K, reciprocal_rank_fusion


def test_default_k_is_60():
    assert RRF_K == 60


def test_single_channel_scores_are_one_over_k_plus_rank():
    fused = reciprocal_rank_fusion({"vector": ["a", "b", "c"]})
    assert fused["a"][0] == pytest.approx(1 / 61)
    assert fused["b"][0] == pytest.approx(1 / 62)
    assert fused["c"][0] == pytest.approx(1 / 63)


def test_ranks_are_one_based_per_channel():
    fused = reciprocal_rank_fusion({"vector": ["a", "b"], "keyword": ["b", "a"]})
    assert fused["a"][1] == {"vector": 1, "keyword": 2}
    assert fused["b"][1] == {"vector": 2, "keyword": 1}


def test_candidate_in_two_channels_sums_both_contributions():
    fused = reciprocal_rank_fusion({"vector": ["a", "b"], "keyword": ["b"]})
    assert fused["b"][0] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["b"][0] > fused["a"][0]


def test_candidate_of_one_channel_only_has_only_that_rank():
    fused = reciprocal_rank_fusion({"vector": ["a"], "keyword": ["z"]})
    assert fused["z"][1] == {"keyword": 1}
    assert set(fused) == {"a", "z"}


def test_weights_scale_a_channels_contribution():
    fused = reciprocal_rank_fusion({"vector": ["a"], "keyword": ["b"]}, weights={"keyword": 3.0})
    assert fused["a"][0] == pytest.approx(1 / 61)
    assert fused["b"][0] == pytest.approx(3 / 61)


def test_zero_weight_channel_contributes_nothing_but_keeps_rank():
    fused = reciprocal_rank_fusion({"vector": ["a"], "keyword": ["a"]}, weights={"keyword": 0.0})
    assert fused["a"][0] == pytest.approx(1 / 61)
    assert fused["a"][1] == {"vector": 1, "keyword": 1}


def test_custom_k_changes_the_scores():
    fused = reciprocal_rank_fusion({"vector": ["a", "b"]}, k=1)
    assert fused["a"][0] == pytest.approx(1 / 2)
    assert fused["b"][0] == pytest.approx(1 / 3)


def test_no_channels_fuse_to_nothing():
    assert reciprocal_rank_fusion({}) == {}
    assert reciprocal_rank_fusion({"vector": []}) == {}
