"""Feelings told by cue words (core/write/emotion.py), for dialogue queries."""
from memplane_server.core.retrieval.transcript import read_transcript
from memplane_server.core.write.emotion import emotions


def test_chinese_cues_name_their_feeling():
    assert emotions("我今天拿到了数学考试的满分！真的超级开心！") == ["开心"]
    assert emotions("我也会有点紧张呢") == ["焦虑"]


def test_english_cues_match_whole_words_only():
    assert emotions("I was so nervous and sad") == ["焦虑", "悲伤"]
    assert emotions("a madrigal about a mission") == []


def test_the_feelings_of_a_dialogue_are_the_users_not_the_assistants():
    t = read_transcript('<Bart>:"我有点紧张"\n<Assistant>:"别难过"\n<Bart>:"好吧"\n')
    assert t.feelings() == ["焦虑"]
