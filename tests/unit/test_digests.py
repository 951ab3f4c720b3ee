from datetime import datetime, timedelta, timezone

import numpy as np

from memplane_server.core.write.digests import build_digests, digest_keywords, keyphrases, mean_vector, session_entities
from memplane_server.core.write.windows import SessionTurn
from memplane_server.llm.chat import MalformedOutput
from memplane_server.llm.digest import parse_digest, turns_prompt

GLOBAL = ("global", None, None)
PRIVATE_A = ("private", None, "agent-a")
T0 = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


def turn(i, content, group=GLOBAL, vector=None):
    return SessionTurn(i, group, content, None, vector, T0 + timedelta(minutes=i))


def test_a_term_rare_in_the_tenant_leads_a_term_every_row_holds():
    texts = ["We are moving to Boston next week", "The move is stressful but we love Boston"]
    phrases = keyphrases(texts, common={"love": 0.3, "week": 0.2})
    assert phrases.index("boston") < phrases.index("love")


def test_a_term_held_by_every_row_is_no_keyphrase():
    assert "hello" not in keyphrases(["hello there", "hello again"], common={"hello": 1.0})


def test_a_term_said_in_more_turns_leads_one_said_once():
    phrases = keyphrases(["pottery class today", "my pottery is drying", "a lamp"], common={})
    assert phrases[0] == "potteri"  # keyword tokens are stemmed


def test_entities_named_most_often_come_first():
    assert session_entities(["I met Ana in Lisbon", "Then I saw Ana again", "I told Ana so"])[:2] == ["ana", "lisbon"]


def test_the_mean_vector_is_normalised_and_needs_every_turn_vector():
    a, b = np.array([1, 0], dtype=np.float32), np.array([0, 1], dtype=np.float32)
    v = mean_vector([turn(0, "x", vector=a), turn(1, "y", vector=b)])
    assert np.isclose(np.linalg.norm(v), 1.0) and np.isclose(v[0], v[1])
    assert mean_vector([turn(0, "x", vector=a), turn(1, "y")]) is None


def test_one_digest_per_visibility_so_private_text_stays_in_its_own():
    turns = [turn(0, "We moved to Boston"), turn(1, "Boston is cold"), turn(2, "secret plan for Zanzibar", PRIVATE_A)]
    shared, private = build_digests("s1", turns, common={})
    assert shared.group == GLOBAL and private.group == PRIVATE_A
    assert "zanzibar" not in shared.text and "zanzibar" in private.text
    assert (shared.turns, shared.first_at, shared.last_at) == (2, T0, T0 + timedelta(minutes=1))


def test_the_digest_keywords_hold_keyphrases_and_entity_words():
    (d,) = build_digests("s1", [turn(0, "We flew to Lisbon with Ana for the pottery workshop")], common={})
    words = digest_keywords(d).split()
    assert {"lisbon", "ana", "potteri"} <= set(words)


def test_a_model_digest_needs_a_non_empty_text():
    assert parse_digest('{"digest": " moved to Boston "}') == "moved to Boston"
    for bad in ('{"digest": ""}', '{"summary": "x"}', "no json"):
        try:
            parse_digest(bad)
        except MalformedOutput:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_a_long_session_is_cut_and_says_how_many_turns_were_left_out():
    prompt = turns_prompt(["x" * 5000] * 5)
    assert "(and 3 more turns)" in prompt
