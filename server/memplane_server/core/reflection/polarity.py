"""Whether two statements about the same thing say opposite things: "never travels before 8am"
against "always travels before 8am" (seen from the packaged 1.5B model), 从不 against 总是.

A clause's polarity is the parity of its negations (not, never, don't, avoid; 不, 没, 别, 从不), of
the sides it takes on opposite pairs (before/after, like/hate; 之前/之后) and of the order of what
stands around "before" or "after". Two clauses about the same words whose parities differ contradict
each other; a paraphrase that flips two of them keeps its meaning: "never before 8am" as "only after
8am", "never book the hotel before the visa" as "get the visa before booking the hotel". Clauses are
about the same thing when they share most of their words, polarity words aside.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from ..retrieval.tokens import keyword_tokens

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_CLAUSE_END = re.compile(r"[;!?。；！？\n]+|[.,](?!\d)|，|但是|但|而且|并且")

_NEGATIONS_EN = frozenset(
    "not no never nor neither none nothing nobody nowhere without cannot avoid avoids avoided avoiding "
    "dont doesnt didnt wont cant isnt arent wasnt werent shouldnt mustnt".split())
# Phrases that hold a negating character without negating (不过 "but", 非常 "very", 无论 "whatever").
_NOT_NEGATIONS_ZH = re.compile(r"不过|不仅|不但|不管|不断|不错|差不多|无论|非常")
_NEGATIONS_ZH = re.compile(r"从来不|从不|从没|没有|不要|不用|不必|无法|避免|禁止|别|没|不|未|勿|无|非|莫")

# Opposite sides: a clause on one side, its counterpart on the other. The first pair is the
# temporal one, whose two arguments may also swap places.
_OPPOSITES_EN = [
    ({"before"}, {"after"}), ({"earlier", "early"}, {"later", "late"}), ({"above"}, {"below"}),
    ({"more"}, {"less", "fewer"}), ({"increase", "increases", "increased"}, {"decrease", "decreases", "decreased"}),
    ({"enable", "enables", "enabled"}, {"disable", "disables", "disabled"}),
    ({"include", "includes", "included"}, {"exclude", "excludes", "excluded"}),
    ({"accept", "accepts", "accepted"}, {"reject", "rejects", "rejected"}),
    ({"like", "likes", "liked", "love", "loves", "loved", "enjoy", "enjoys"},
     {"dislike", "dislikes", "disliked", "hate", "hates", "hated"}),
    ({"succeed", "succeeds", "succeeded", "success", "successful"}, {"fail", "fails", "failed", "failure"}),
]
_OPPOSITES_ZH = [
    (re.compile(r"之前|以前|(?<=[点时号日天])前"), re.compile(r"之后|以后|(?<=[点时号日天])后")),
    (re.compile(r"喜欢|爱"), re.compile(r"讨厌|厌恶")), (re.compile(r"成功"), re.compile(r"失败")),
    (re.compile(r"增加"), re.compile(r"减少")), (re.compile(r"允许"), re.compile(r"拒绝")),
]
_TEMPORAL = re.compile(r"\b(?:before|after)\b|之前|以前|之后|以后|(?<=[点时号日天])[前后]")
# Words of a statement's frame rather than of its claim: "the user" in a memory is "I" in its source.
_FRAME_ZH = re.compile(r"用户|我们|我|的|了|是|在|他|她|你|总是|一直|每次|都|就|也|先|再")
_FRAME_EN = frozenset("always ever only user users".split())
_POLAR_EN = _NEGATIONS_EN | _FRAME_EN | {w for pair in _OPPOSITES_EN for side in pair for w in side}
# "8 am", "8:00" and "8am" are one time.
_TIME = re.compile(r"(\d+)(?::00)?\s*(am|pm)\b|(\d+):00\b")


@dataclass(frozen=True)
class Clause:
    text: str
    words: frozenset[str]  # what it is about: stemmed words and Chinese characters, polarity aside
    negations: int
    sides: frozenset[tuple[int, int]]  # (pair, side) taken
    around: tuple[frozenset[str], frozenset[str]] | None  # the words before and after "before"/"after"


def _plain(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold().replace("’", "'").replace("n't", "nt")
    return _TIME.sub(lambda m: m.group(3) or m.group(1) + m.group(2), text)


def _words(plain: str) -> frozenset[str]:
    latin = " ".join(w for w in _WORD.findall(plain) if w not in _POLAR_EN)
    bare = _FRAME_ZH.sub(" ", _NEGATIONS_ZH.sub(" ", _NOT_NEGATIONS_ZH.sub(" ", plain)))
    for pair in _OPPOSITES_ZH:
        bare = pair[1].sub(" ", pair[0].sub(" ", bare))
    return frozenset({t for t in keyword_tokens(latin) if not _CJK.search(t)} | set(_CJK.findall(bare)))


def clause(text: str) -> Clause:
    plain = _plain(text)
    zh = _NOT_NEGATIONS_ZH.sub(" ", plain)
    english = set(_WORD.findall(plain))
    negations = sum(w in _NEGATIONS_EN for w in _WORD.findall(plain)) + len(_NEGATIONS_ZH.findall(zh))
    sides = {(p, s) for p, pair in enumerate(_OPPOSITES_EN) for s in (0, 1) if pair[s] & english}
    sides |= {(len(_OPPOSITES_EN) + p, s) for p, pair in enumerate(_OPPOSITES_ZH) for s in (0, 1) if pair[s].search(zh)}
    marker = _TEMPORAL.search(plain)
    around = (_words(plain[:marker.start()]), _words(plain[marker.end():])) if marker else None
    return Clause(text, _words(plain), negations, frozenset(sides), around)


def clauses(text: str) -> list[Clause]:
    return [c for part in _CLAUSE_END.split(text) if part.strip() and (c := clause(part)).words]


def overlap(a: Clause, b: Clause) -> int:
    """How many words two clauses share when they are about the same thing, else 0: at least two,
    and at least half of the shorter one's, and both or neither ordering things in time ("deploy"
    as one step of a procedure says nothing of "never deploy before migrating")."""
    if (a.around is None) != (b.around is None):
        return 0
    shared = len(a.words & b.words)
    return shared if shared >= 2 and 2 * shared >= min(len(a.words), len(b.words)) else 0


def _swapped_around(a: Clause, b: Clause) -> bool:
    """Whether what stands before "before" in one stands after it in the other."""
    if a.around is None or b.around is None:
        return False
    (a_pre, a_post), (b_pre, b_post) = a.around, b.around
    return len(a_pre & b_post) + len(a_post & b_pre) > len(a_pre & b_pre) + len(a_post & b_post)


def opposite(a: Clause, b: Clause) -> bool:
    """Whether a says the opposite of b (both about the same thing)."""
    swaps = sum(1 for p, s in a.sides if (p, 1 - s) in b.sides and (p, s) not in b.sides)
    return (a.negations + b.negations + swaps + _swapped_around(a, b)) % 2 == 1
