from memplane_server.stores.postgres.search.plans import parse_tsvector


def test_tsvector_text_parses_to_counts():
    assert parse_tsvector("'camp':3 'carolin':1,5 '上海':2") == {"camp": 1, "carolin": 2, "上海": 1}
