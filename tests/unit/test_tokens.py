"""keyword_tokens / tsquery_from_tokens: the app-side tokenizer shared by indexing and querying."""
from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memplane_server.core.retrieval.tokens import (
    MAX_LOOKUP_NAMES,
    keyword_tokens,
    lookup_names,
    needs_segmenting,
    tsquery_from_tokens,
)

# A tsquery built from tokens: quoted \w-only lexemes joined by " | ", or nothing at all.
_SAFE_TSQUERY = re.compile(r"^(?:'\w+'(?: \| '\w+')*)?$")


def test_english_tokens_are_lowercased():
    assert keyword_tokens("Shanghai PARIS") == keyword_tokens("shanghai paris")


def test_english_stopwords_are_dropped():
    assert keyword_tokens("the cat and the hat") == ["cat", "hat"]


def test_english_contraction_stopwords_are_dropped():
    assert keyword_tokens("I'm sure it's fine, don't worry") == ["sure", "fine", "worri"]


def test_single_letters_are_dropped_but_single_digits_kept():
    assert keyword_tokens("x y z 7 plan b") == ["7", "plan"]


def test_multi_digit_numbers_are_kept():
    assert keyword_tokens("room 1204 in 2024") == ["room", "1204", "2024"]


def test_possessives_are_about_their_owner():
    assert keyword_tokens("Gina's store") == keyword_tokens("Gina store") == ["gina", "store"]


def test_inflections_share_a_stem():
    assert keyword_tokens("camped") == keyword_tokens("camping") == ["camp"]
    assert keyword_tokens("research") == keyword_tokens("researching")
    assert keyword_tokens("paint") == keyword_tokens("painting")


def test_punctuation_separates_words():
    assert keyword_tokens("alpha,beta;gamma-delta") == ["alpha", "beta", "gamma", "delta"]


def test_accented_latin_letters_are_part_of_words():
    assert keyword_tokens("Café Zürich") == ["café", "zürich"]


def test_duplicate_tokens_are_kept_in_order():
    assert keyword_tokens("tea coffee tea") == ["tea", "coffe", "tea"]


def test_blank_text_has_no_tokens():
    assert keyword_tokens("   \n\t ") == []
    assert keyword_tokens("") == []


def test_chinese_is_segmented_by_jieba():
    tokens = keyword_tokens("我住在上海朝阳区")
    assert "上海" in tokens
    assert "朝阳" in tokens


def test_chinese_stopwords_are_dropped():
    tokens = keyword_tokens("我住在上海朝阳区")
    assert "我" not in tokens
    assert "在" not in tokens


def test_chinese_plural_pronoun_stopword_is_dropped():
    tokens = keyword_tokens("我们喜欢北京烤鸭")
    assert "我们" not in tokens
    assert "北京" in tokens
    assert "烤鸭" in tokens


def test_mixed_chinese_and_english_text_yields_both():
    tokens = keyword_tokens("I like 北京烤鸭 and Python 3")
    assert tokens[0] == "like"
    assert "北京" in tokens and "烤鸭" in tokens
    assert tokens[-2:] == ["python", "3"]
    assert "and" not in tokens


def test_tsquery_ors_quoted_tokens():
    assert tsquery_from_tokens(["cat", "dog"]) == "'cat' | 'dog'"


def test_tsquery_deduplicates_keeping_first_order():
    assert tsquery_from_tokens(["dog", "cat", "dog", "cat"]) == "'dog' | 'cat'"


def test_tsquery_skips_empty_tokens():
    assert tsquery_from_tokens(["", "cat", ""]) == "'cat'"


def test_tsquery_of_no_tokens_is_empty():
    assert tsquery_from_tokens([]) == ""
    assert tsquery_from_tokens(keyword_tokens("the and of")) == ""


def test_tsquery_of_hostile_text_has_no_query_syntax():
    query = tsquery_from_tokens(keyword_tokens("foo' & !bar | (baz:*) <-> 'qux'' \\ o'neil"))
    assert query == "'foo' | 'bar' | 'baz' | 'qux' | 'oneil'"


# U+00D7 MULTIPLICATION SIGN and U+00F7 DIVISION SIGN are excluded here: they sit inside
# the tokenizer's Latin range; test_math_signs_are_not_part_of_tokens covers them.
_TEXT = st.text(
    alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\u00d7\u00f7"), max_size=60
)


@settings(max_examples=300, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(_TEXT)
def test_tsquery_of_any_text_contains_only_quoted_word_characters(text):
    query = tsquery_from_tokens(keyword_tokens(text))
    assert _SAFE_TSQUERY.match(query), query


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(st.lists(st.from_regex(r"[0-9a-z\u4e00-\u9fff]{1,8}", fullmatch=True), max_size=10))
def test_tsquery_lists_each_distinct_token_exactly_once(tokens):
    query = tsquery_from_tokens(tokens)
    lexemes = [part.strip("'") for part in query.split(" | ")] if query else []
    assert lexemes == list(dict.fromkeys(tokens))


def test_math_signs_are_not_part_of_tokens():
    assert keyword_tokens("2×3 a÷b") == ["2", "3"]


def test_lookup_names_keep_words_unstemmed_and_join_neighbours_for_compound_attributes():
    names = lookup_names("What is Bob's home address?")
    assert {"bob", "home", "address", "home address", "home_address", "home-address"} <= set(names)


def test_lookup_names_map_first_person_to_the_user_entity():
    assert lookup_names("what is my email")[0] == "user"
    assert lookup_names("我的邮箱是什么")[0] == "user"


def test_lookup_names_segment_chinese_and_drop_question_words():
    names = lookup_names("我的邮箱地址是什么")
    assert {"邮箱", "地址", "邮箱地址"} <= set(names) and "什么" not in names


def test_lookup_names_are_capped():
    assert len(lookup_names(" ".join(f"word{i}" for i in range(500)))) == MAX_LOOKUP_NAMES


def test_tokens_of_a_text_are_its_words_tokens_joined():
    # bench/bulk.py tokenises word by word (each word stemmed once) and a turn window as its turns'
    # tokens joined; both rely on no token spanning whitespace.
    text = "Gina's store opened\nlast week, didn't it? 我们去北京旅游 camping-trip 2023年 I'm Painting"
    assert keyword_tokens(text) == [t for word in text.split() for t in keyword_tokens(word)]


def test_only_text_holding_chinese_needs_segmenting():
    assert needs_segmenting("她的猫叫什么名字") and needs_segmenting("Where is 北京?")
    assert not needs_segmenting("When did Caroline go to the LGBTQ support group?")


def test_a_word_stems_the_same_the_second_time():
    first = keyword_tokens("Melanie painted sunrises while camping")
    assert keyword_tokens("Melanie painted sunrises while camping") == first == ["melani", "paint", "sunris", "camp"]
