import uuid

import pytest

from memplane_server.core.retrieval.bm25 import KeywordMatch, best_matches, bm25_scores


def test_a_word_every_candidate_shares_counts_for_little():
    docs = [["caroline", "run"], ["caroline", "paint"], ["caroline", "research", "adopt"], ["caroline", "swim"]]
    scores = bm25_scores(["caroline", "research"], docs)
    assert scores.index(max(scores)) == 2
    assert max(scores[0], scores[1], scores[3]) < scores[2] / 3


def test_documents_without_query_terms_score_zero():
    assert bm25_scores(["tea"], [["coffee"], ["tea"]])[0] == 0.0


def test_repeated_terms_saturate():
    once, thrice = bm25_scores(["tea"], [["tea", "x", "y"], ["tea", "tea", "tea"]])
    assert once < thrice < 3 * once


@pytest.mark.parametrize("query, docs", [([], [["a"]]), (["a"], [])])
def test_empty_inputs_give_zeros(query, docs):
    assert bm25_scores(query, docs) == [0.0] * len(docs)


def test_count_maps_score_like_token_lists():
    as_lists = bm25_scores(["tea"], [["tea", "tea", "x"], ["tea"]])
    as_maps = bm25_scores(["tea"], [{"tea": 2, "x": 1}, {"tea": 1}])
    assert as_lists == pytest.approx(as_maps)


def test_tsvector_text_parses_to_counts():
    from memplane_server.stores.postgres.search.plans import parse_tsvector

    assert parse_tsvector("'camp':3 'carolin':1,5 '上海':2") == {"camp": 1, "carolin": 2, "上海": 1}


def test_best_matches_orders_by_bm25_cuts_to_the_limit_and_drops_non_matches():
    ids = [uuid.uuid4() for _ in range(4)]
    matches = [KeywordMatch(ids[0], 0.9, {"caroline": 1, "x": 1}), KeywordMatch(ids[1], 0.1, {"research": 1}),
               KeywordMatch(ids[2], 0.5, {"other": 1}), KeywordMatch(ids[3], 0.2, {"caroline": 1, "research": 1})]
    best = best_matches(["caroline", "research"], matches, 2)
    assert [m.id for m in best] == [ids[3], ids[1]]
    assert all(m.score > 0 for m in best)
    assert ids[2] not in {m.id for m in best_matches(["caroline", "research"], matches, 10)}


def test_maps_of_the_query_terms_with_lengths_score_as_whole_maps():
    whole = [{"tea": 2, "x": 1, "y": 4}, {"tea": 1}, {"cup": 3, "tea": 1}]
    lengths = [sum(d.values()) for d in whole]
    only_query = [{t: c for t, c in d.items() if t in ("tea", "cup")} for d in whole]
    assert bm25_scores(["tea", "cup"], only_query, lengths=lengths) == pytest.approx(bm25_scores(["tea", "cup"], whole))
