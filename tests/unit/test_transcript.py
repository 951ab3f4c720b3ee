from memplane_server.core.retrieval.transcript import read_transcript


def test_a_bracketed_quoted_dialogue_is_read_as_turns_without_labels():
    t = read_transcript('<BOD>\n<Bart>:"我要表演魔术！"\n<Assistant>:"真是太棒了！"\n<Bart>:"我有点紧张"\n')
    assert t.text == "我要表演魔术！\n真是太棒了！\n我有点紧张"
    assert t.last_turn == "我有点紧张"


def test_plain_name_colon_lines_are_a_transcript():
    t = read_transcript("Ana: where did you go?\nBen: camping by the lake\nAna: nice!\n")
    assert t.last_turn == "nice!"


def test_full_width_colons_are_speaker_separators():
    assert read_transcript("用户：我今天很累\n助手：怎么了？\n用户：加班").last_turn == "加班"


def test_a_single_question_is_not_a_transcript():
    assert read_transcript("What did Ben say about camping?") is None


def test_one_labelled_line_is_not_a_transcript():
    assert read_transcript("Ana: where did you go?") is None


def test_a_line_without_a_speaker_makes_it_no_transcript():
    assert read_transcript("Ana: where did you go?\nthe lake, I think. Time: 5pm") is None


def test_a_sentence_with_a_colon_is_not_a_speaker_line():
    assert read_transcript("Note this. Deploys: Tuesdays\nRollbacks: Fridays. Really?: yes") is None


def test_key_value_lines_where_no_key_repeats_are_not_a_transcript():
    assert read_transcript("Deploys: Tuesdays\nRollbacks: Fridays") is None


DIALOGUE = ('<BOD>\n<Bart>:"我要表演魔术！"\n<Assistant>:"真是太棒了！"\n<Bart>:"我有点紧张"\n'
            '<Assistant>:"深呼吸就好"\n<Bart>:"穿什么好呢？"\n')


def test_the_user_turns_are_those_of_every_speaker_not_labelled_as_the_assistant():
    assert read_transcript(DIALOGUE).user_turns() == ["我要表演魔术！", "我有点紧张", "穿什么好呢？"]


def test_roles_are_unknown_when_no_speaker_is_labelled_as_an_assistant():
    t = read_transcript("Ana: where did you go?\nBen: camping by the lake\nAna: nice!\n")
    assert t.user_turns() is None
    assert t.focus(2) == "nice!" and t.words(user_only=True) == t.text


def test_the_focus_is_the_users_last_utterances_even_after_an_assistant_turn():
    t = read_transcript(DIALOGUE + '<Assistant>:"红色的衣服"\n')
    assert t.focus(1) == "穿什么好呢？"
    assert t.focus(2) == "我有点紧张\n穿什么好呢？"
    assert t.focus(0) == "红色的衣服"


def test_user_only_words_leave_the_assistants_turns_out():
    t = read_transcript("用户：我今天很累\n助手：怎么了？\n用户：加班")
    assert t.words(user_only=True) == "我今天很累\n加班"
    assert t.words(user_only=False) == "我今天很累\n怎么了？\n加班"
