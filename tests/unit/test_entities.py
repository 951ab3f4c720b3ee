"""The entity extractor (core/write/entities.py): what a memory names, in English and Chinese, without the
speaker of a turn."""
from __future__ import annotations

from memplane_server.core.write.entities import MAX_ENTITIES, extract_entities


def test_people_places_and_organisations_in_english():
    found = extract_entities("I met Matt Patterson in Rome, and later we drove to the Grand Canyon with Door Dash folks.")
    assert {"matt patterson", "rome", "grand canyon", "door dash"} <= set(found)


def test_the_speaker_label_of_a_turn_is_not_an_entity():
    assert "caroline" not in extract_entities("Caroline: I moved here from Sweden four years ago.")
    assert extract_entities("Caroline: I moved here from Sweden four years ago.") == ["sweden"]
    assert "bart" not in extract_entities("<Bart>:\"我们去北京玩吧\"")


def test_a_person_named_inside_the_turn_is_an_entity():
    assert "caroline" in extract_entities("Melanie: That is great news, Caroline!")


def test_ordinary_words_opening_a_sentence_are_not_entities():
    assert extract_entities("Melanie: Taking care of ourselves is vital. Painting helps me relax.") == []


def test_a_name_opening_a_longer_span_is_kept():
    assert "door dash" in extract_entities("Door Dash let me go this month.")


def test_quoted_titles_and_possessives():
    found = extract_entities('Melanie: I loved reading "Charlotte\'s Web" as a kid, and Gina\'s store too.')
    assert "charlotte's web" in found
    assert "gina" in found


def test_a_title_with_a_leading_article_keys_without_it():
    assert "lean startup" in extract_entities('Jon: I started reading "The Lean Startup" yesterday.')


def test_events_written_lowercase():
    found = extract_entities("Caroline: Last week I went to a pride parade and signed up for a pottery class.")
    assert {"pride parade", "pottery class"} <= set(found)


def test_a_common_adjective_does_not_name_an_event():
    assert extract_entities("It was a great party with an amazing show.") == []


def test_weekdays_months_and_interjections_are_not_entities():
    assert extract_entities("Wow, on Monday in January we just chilled. Thanks!") == []


def test_hashtags_and_handles():
    assert {"pridemonth", "gina_designs"} <= set(extract_entities("Posted it with #PrideMonth, tagging @gina_designs"))


def test_chinese_people_places_and_organisations():
    found = extract_entities("李娜在华为公司上班，周末和张伟去上海迪士尼。")
    assert {"李娜", "华为公司", "张伟", "上海"} <= set(found)


def test_chinese_names_outside_the_dictionary():
    assert {"小明", "张伟"} <= set(extract_entities("小明和张伟昨天去了故宫博物院。"))


def test_chinese_events_and_titles():
    found = extract_entities("Bart在圣诞节晚会上跳舞，还读了《小王子》。")
    assert {"圣诞节晚会", "小王子"} <= set(found)
    assert "bart" in found  # named in the text, not a speaker label: rarity decides what it links


def test_chinese_common_words_are_not_entities():
    assert extract_entities("今天我觉得非常开心，吃了好吃的早餐。") == []


def test_keys_are_lowercase_distinct_and_bounded():
    text = " and ".join(f"met Person{i} Smith" for i in range(50))
    found = extract_entities(text + " with Rome, ROME and rome")
    assert len(found) == MAX_ENTITIES
    assert all(k == k.lower() for k in found)
    assert len(set(found)) == len(found)


def test_a_sentence_ending_in_a_colon_is_not_a_speaker_label():
    assert extract_entities("To deploy the API: run migrations") == ["api"]
