"""ungrounded: an extracted claim stands only on words its input holds (core/write/claims.py)."""
from __future__ import annotations

import pytest

from memplane_server.core.write.claims import names, ungrounded


@pytest.mark.parametrize("evidence, turn, value, shown", [
    ("I live in Berlin", "Well, I live in Berlin now.", "Berlin", "Well, I live in Berlin now."),
    ("“I LIVE IN BERLIN.”", "i live in berlin", "berlin", "i live in berlin"),
    ("我刚搬到了深圳", "我刚从上海搬到了深圳。", "深圳", "我刚从上海搬到了深圳。"),
    ("moving back", "I'm moving back", "Hangzhou", "user address Hangzhou\nI'm moving back"),
    ("I fly tomorrow", "I fly tomorrow", "2026-12-08", "I fly tomorrow"),
    ("the call is next Friday at noon", "the call is next Friday at noon", "2026-12-11T12:00", "x"),
    ("我下周三出发", "我下周三出发", "2026-12-16", "我下周三出发"),
    ("no longer own a dog", "I no longer own a dog", "", "I no longer own a dog"),
])
def test_a_claim_quoting_its_turn_with_a_value_it_read_stands(evidence, turn, value, shown):
    assert ungrounded(evidence, turn, value, shown) is None


@pytest.mark.parametrize("evidence, turn, value, shown, why", [
    ("", "I live in Berlin", "Berlin", "I live in Berlin", "no evidence"),
    ("I live in Paris", "I live in Berlin", "Paris", "I live in Berlin", "not in the turn"),
    ("hi, how are you today?", "hi, how are you today?", "Shenzhen", "hi, how are you today?", "a question"),
    ("hi, how are you", "hi, how are you", "Shenzhen", "hi, how are you", "in nothing"),
    ("my number is new", "my number is new", "555-0199", "my number is new", "in nothing"),
    ("今晚做什么菜好？", "今晚做什么菜好？", "今晚做什么菜好？", "今晚做什么菜好？", "a question"),
    ("Where can I wash it?", "Where can I wash it?", "wash it?", "Where can I wash it?", "a question"),
    ("Please plan a birthday party for her", "Please plan a birthday party for her.", "2027-12-07",
     "Please plan a birthday party for her.", "in nothing"),
    ("哈哈，好的，再见。", "哈哈，好的，再见。", "你好！再见。", "你好！\n今天天气怎么样？\n哈哈，好的，再见。", "in nothing"),
    ("深圳有什么好吃的？", "深圳有什么好吃的？", "深圳好吃的", "深圳有什么好吃的？", "evidence is a question"),
    ("Okay, bye for now.", "Okay, bye for now.", "Okay, bye for now.", "Okay, bye for now.", "the whole turn"),
    ("Haha, that's funny.", "Haha, that's funny.", "Haha, that's funny", "Haha, that's funny.", "the whole turn"),
    ("哈哈哈，好的，再见。", "哈哈哈，好的，再见。", "哈哈哈，好的，再见", "哈哈哈，好的，再见。", "the whole turn"),
])
def test_a_claim_the_input_does_not_hold_is_dropped(evidence, turn, value, shown, why):
    assert why in (ungrounded(evidence, turn, value, shown) or "")


@pytest.mark.parametrize("turn", ["Berlin.", "New York", "Vegetarian", "深圳。"])
def test_a_short_answer_is_a_value_though_it_is_the_whole_turn(turn):
    assert ungrounded(turn, turn, turn.strip("."), turn) is None


def test_a_turn_that_does_not_state_the_known_value_does_not_observe_it_again():
    shown = "user allergy penicillin\nThanks."
    assert "restates a known value" in ungrounded("Thanks.", "Thanks.", "penicillin", shown, current="penicillin")


def test_a_value_from_an_earlier_turn_that_is_not_the_current_one_stands():
    shown = "I lived in Hangzhou before\nuser city Shanghai\nI'm moving back"
    assert ungrounded("moving back", "I'm moving back", "Hangzhou", shown, current="Shanghai") is None


@pytest.mark.parametrize("evidence, value", [
    ("I no longer have Rex", "Rex"),
    ("I quit the hospital", "nurse at the city hospital"),
    ("我已经把咪咪送给朋友了", "咪咪"),
    ("我把丰田卖了", "白色的丰田"),
])
def test_a_delete_naming_what_no_longer_holds_names_it(evidence, value):
    assert names(evidence, value)


@pytest.mark.parametrize("evidence, value", [
    ("What should I cook tonight?", "vegetarian"),
    ("谢谢。", "咪咪"),
    ("我的车坏了", "白色的丰田"),
])
def test_a_turn_that_does_not_name_a_value_does_not_delete_it(evidence, value):
    assert not names(evidence, value)
