"""parse_reflection: validating a model's JSON answer (llm/reflection.py)."""
from __future__ import annotations

import json

import pytest

from memplane_server.core.model import Kind
from memplane_server.llm.reflection import MAX_ITEMS, MalformedOutput, ReflectedMemory, parse_reflection


def answer(memories, summary="It went well.") -> str:
    return json.dumps({"memories": memories, "summary": summary})


def test_valid_answer_yields_typed_memories_and_summary():
    r = parse_reflection(answer([
        {"kind": "preference", "content": "Likes window seats.", "context": "when flying", "confidence": 0.9},
        {"kind": "lesson", "content": "Check the visa first.", "context": "", "confidence": 1},
    ]))
    assert r.memories == [
        ReflectedMemory(Kind.PREFERENCE, "Likes window seats.", "when flying", 0.9),
        ReflectedMemory(Kind.LESSON, "Check the visa first.", "", 1.0),
    ]
    assert r.summary == "It went well."


def test_kind_is_case_insensitive():
    r = parse_reflection(answer([{"kind": "FACT", "content": "Lives in Lyon."}]))
    assert r.memories[0].kind is Kind.FACT


def test_missing_confidence_defaults_to_0_8_and_missing_context_to_empty():
    r = parse_reflection(answer([{"kind": "fact", "content": "x"}]))
    assert r.memories[0].confidence == 0.8
    assert r.memories[0].context == ""


def test_content_context_and_summary_are_stripped():
    r = parse_reflection(answer([{"kind": "fact", "content": "  x  ", "context": " y "}], summary="  s \n"))
    assert (r.memories[0].content, r.memories[0].context, r.summary) == ("x", "y", "s")


def test_missing_summary_is_empty():
    r = parse_reflection(json.dumps({"memories": []}))
    assert r == parse_reflection(json.dumps({"memories": [], "summary": None}))
    assert r.memories == [] and r.summary == ""


def test_fenced_json_block_is_accepted():
    body = answer([{"kind": "procedure", "content": "Run make."}])
    r = parse_reflection(f"```json\n{body}\n```")
    assert r.memories[0].kind is Kind.PROCEDURE


def test_an_object_inside_prose_is_the_answer():
    r = parse_reflection(f"Sure! Here it is: {answer([])} Hope that helps.")
    assert r.summary == "It went well."


def test_plain_fenced_block_is_accepted():
    r = parse_reflection(f"  ```\n{answer([])}\n```  ")
    assert r.summary == "It went well."


@pytest.mark.parametrize("text", ["", "not json", '{"memories": [', "Sure! Here it is: {"])
def test_malformed_json_is_rejected(text):
    with pytest.raises(MalformedOutput, match="not JSON"):
        parse_reflection(text)


@pytest.mark.parametrize("text", ["[]", '"memories"', '{"memories": {}}', '{"summary": "s"}'])
def test_json_without_a_memories_list_is_rejected(text):
    with pytest.raises(MalformedOutput, match="'memories' list"):
        parse_reflection(text)


def test_unknown_kind_is_rejected():
    with pytest.raises(MalformedOutput, match="unknown kind 'opinion'"):
        parse_reflection(answer([{"kind": "opinion", "content": "x"}]))


@pytest.mark.parametrize("kind", ["turn", "event", "summary"])
def test_kinds_outside_the_reflection_set_are_rejected(kind):
    with pytest.raises(MalformedOutput, match="fact/lesson/preference/procedure"):
        parse_reflection(answer([{"kind": kind, "content": "x"}]))


@pytest.mark.parametrize("item", [{"kind": "fact"}, {"kind": "fact", "content": "   "}, {"kind": "fact", "content": 3}])
def test_missing_blank_or_non_string_content_is_rejected(item):
    with pytest.raises(MalformedOutput, match="content"):
        parse_reflection(answer([item]))


@pytest.mark.parametrize("confidence", [-0.1, 1.5, "high", None, float("nan")])
def test_confidence_out_of_range_or_not_a_number_is_rejected(confidence):
    with pytest.raises(MalformedOutput, match="confidence"):
        parse_reflection(answer([{"kind": "fact", "content": "x", "confidence": confidence}]))


@pytest.mark.parametrize("item", ["a string", 3, ["fact", "x"], None])
def test_non_object_memory_items_are_rejected(item):
    with pytest.raises(MalformedOutput, match="object"):
        parse_reflection(answer([item]))


def test_non_string_summary_is_rejected():
    with pytest.raises(MalformedOutput, match="summary"):
        parse_reflection(answer([], summary=["a", "b"]))


def test_answer_is_truncated_to_20_memories():
    items = [{"kind": "fact", "content": f"fact {n}"} for n in range(MAX_ITEMS + 5)]
    r = parse_reflection(answer(items))
    assert MAX_ITEMS == 20
    assert [m.content for m in r.memories] == [f"fact {n}" for n in range(20)]


def test_items_beyond_the_limit_are_not_validated():
    items = [{"kind": "fact", "content": "ok"}] * MAX_ITEMS + [{"kind": "bogus"}]
    assert len(parse_reflection(answer(items)).memories) == MAX_ITEMS
