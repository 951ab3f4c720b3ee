"""Whether a model's claim is grounded in what it was shown. The model proposes, Memplane decides:
the words a claim quotes as evidence must be in the turn it cites (a small model drops words when it
copies, "我刚搬到了深圳" from "我刚从上海搬到了深圳": every word it keeps must be the turn's), and its value must be in what the
model read (the turns, earlier turns, the known facts) or be a date or time (resolved from "tomorrow").
A claim that fails is dropped: a weak model can leave memory less complete, never wrong. Measured with
the packaged 1.5B model: asked about "hi, how are you today?" it claimed the user's address was
"Shenzhen", the example city of its own prompt."""
from __future__ import annotations

import re
import unicodedata

from ..retrieval.tokens import keyword_tokens

_SPACE = re.compile(r"\s+")
_EDGES = " \t\"'“”‘’「」『』.,;:!?。，；：！？"
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_QUESTION = re.compile(r"[?？]\s*$")
_DATE_OR_TIME = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?|\d{1,2}:\d{2}")
# Words a date or time is resolved from ("tomorrow", "next Friday", "at noon", 下周三): a date the turn
# does not hold stands only on one of them. A small model gave "plan a birthday party for her" the
# date a year from NOW.
_TIME_WORDS = re.compile(
    r"\b(?:today|tonight|tomorrow|yesterday|next|last|this|coming|ago|weekend|noon|midnight|morning|evening"
    r"|mon|tues?|wed(?:nes)?|thu(?:rs)?|fri|sat(?:ur)?|sun)(?:day)?s?\b|\d|[今明后昨前]天|[上下本这]周|[上下这]个?月"
    r"|星期|周[一二三四五六日天末]|[早晚]上|中午|[点时号日月]", re.IGNORECASE)


def _plain(text: str) -> str:
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip(_EDGES)


def _words(text: str) -> set[str]:
    """Keyword tokens, but Chinese as single characters: segmentation splits a copied phrase apart
    from its sentence otherwise (搬 + 深圳 in the copy, 搬到 + 深圳 in the turn)."""
    return ({t for t in keyword_tokens(text) if not _CJK.search(t)}
            | {c for c in unicodedata.normalize("NFKC", text) if _CJK.match(c)})


def _shown(value: str, shown: str) -> bool:
    if _plain(value) in _plain(shown):
        return True
    words = _words(value)
    return bool(words) and words <= _words(shown)


def quotes(evidence: str, turn: str) -> bool:
    """Whether every word the evidence quotes is the turn's."""
    quoted = _plain(evidence)
    return bool(quoted) and _shown(quoted, turn)


def _whole_sentence(value: str, turn: str) -> bool:
    """A value that is the turn itself, of a sentence's length: a small model stored "Okay, bye for
    now." and "Haha, that's funny." as the user's greeting. A short answer ("Berlin.", "New York")
    still is a value; a three-word one is dropped with the small talk (memory less complete)."""
    plain = _plain(value)
    return plain == _plain(turn) and (len(plain.split()) >= 3 or len(_CJK.findall(plain)) >= 6)


def ungrounded(evidence: str, turn: str, value: str, shown: str, current: str | None = None) -> str | None:
    """Why the claim is not grounded, or None when it is. turn: the text of the turn it cites;
    shown: everything the model read; current: the known value of the claim's entity and attribute.
    A value the turn does not hold may come whole from one line of what the model read ("back to
    the old address"),
    but not be the current value itself: a small model restated it from turns that say nothing
    ("Thanks." re-observed the user's allergy)."""
    if not _plain(evidence):
        return "no evidence quoted"
    if not quotes(evidence, turn):
        return "its evidence is not in the turn it cites"
    if _QUESTION.search(evidence):
        return "its evidence is a question"
    if not value:
        return None
    if _QUESTION.search(value):
        return "its value is a question"
    if _whole_sentence(value, turn):
        return "its value is the whole turn"
    if _shown(value, turn) or (_DATE_OR_TIME.fullmatch(value.strip()) and _TIME_WORDS.search(evidence)):
        return None
    # Whole, from one line of what the model read (a turn, a known fact): Chinese compared by
    # character took "你好！再见。" from two turns of small talk.
    if not any(_plain(value) in _plain(line) for line in shown.splitlines()):
        return "its value is in nothing the model read"
    if current is not None and _plain(value) == _plain(current):
        return "it restates a known value its turn does not state"
    return None


def names(evidence: str, value: str) -> bool:
    """Whether the evidence names the value: a word of it, or two of its Chinese characters. A
    DELETE must say what no longer holds ("I no longer have Rex"): a small model deleted the user's
    diet on "What should I cook tonight?", and a delete loses a fact that may still be true."""
    shared = _words(evidence) & _words(value)
    return any(not _CJK.match(w) for w in shared) or len(shared) >= min(2, len(_words(value)))
