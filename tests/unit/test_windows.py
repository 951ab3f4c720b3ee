from memplane_server.core.write.windows import SessionTurn, fingerprint, windows_to_build, windows_to_upgrade

GLOBAL = ("global", None, None)
PRIVATE_A = ("private", None, "agent-a")


def turns(*contents, group=GLOBAL, marks=None):
    return [SessionTurn(f"{group[2]}-{i}", group, c, (marks or {}).get(i)) for i, c in enumerate(contents)]


def test_a_window_holds_the_turn_and_its_neighbours_in_order():
    built = windows_to_build(turns("a", "b", "c", "d"), 1, "m")
    assert [w.text for w in built] == ["a\nb", "a\nb\nc", "b\nc\nd", "c\nd"]


def test_width_two_reaches_two_turns_each_way():
    built = windows_to_build(turns("a", "b", "c", "d", "e"), 2, "m")
    assert built[2].text == "a\nb\nc\nd\ne"


def test_turns_of_another_visibility_never_enter_a_window():
    session = turns("g1", "g2") + turns("secret", group=PRIVATE_A)
    texts = [w.text for w in windows_to_build(session, 1, "m")]
    assert texts == ["g1\ng2", "g1\ng2", "secret"]


def test_a_turn_without_neighbours_is_alone():
    (window,) = windows_to_build(turns("only"), 1, "m")
    assert window.alone and window.text == "only"


def test_an_unchanged_window_is_not_built_again():
    first = windows_to_build(turns("a", "b"), 1, "m")
    marks = {i: w.fingerprint for i, w in enumerate(first)}
    assert windows_to_build(turns("a", "b", marks=marks), 1, "m") == []


def test_a_new_neighbour_rebuilds_the_window_it_joins():
    marks = {i: w.fingerprint for i, w in enumerate(windows_to_build(turns("a", "b", "c"), 1, "m"))}
    rebuilt = windows_to_build(turns("a", "b", "c", "d", marks=marks), 1, "m")
    assert [w.text for w in rebuilt] == ["b\nc\nd", "c\nd"]


def test_another_embedding_model_rebuilds_every_window():
    assert fingerprint("a", "model-1") != fingerprint("a", "model-2")


def test_an_upgraded_window_is_current_for_the_averaging_builder():
    averaged = windows_to_build(turns("a", "b"), 1, "m+average")
    upgraded = {i: fingerprint(w.text, "m") for i, w in enumerate(averaged)}
    assert windows_to_build(turns("a", "b", marks=upgraded), 1, "m+average", also_current="m") == []


def test_only_windows_still_averaged_from_their_present_text_are_upgraded():
    marks = {i: w.fingerprint for i, w in enumerate(windows_to_build(turns("a", "b", "c"), 1, "m+average"))}
    marks[0] = fingerprint("a\nb", "m")  # already upgraded
    todo = windows_to_upgrade(turns("a", "b", "c", "d", marks=marks), 1, "m", "m+average")
    # b's window holds a, b, c as averaged; c's window gained d since, which the next build averages first.
    assert [(w.text, w.replaces) for w in todo] == [("a\nb\nc", marks[1])]
    assert todo[0].fingerprint == fingerprint("a\nb\nc", "m")
