"""What a query asks for, told from its wording alone (English and Chinese), without an LLM."""
from __future__ import annotations

import enum
import re

from ..model import Kind


class Intent(str, enum.Enum):
    HOW_TO = "how_to"  # "how do I ...", "怎么"
    FACT = "fact"  # "what is ...", "是什么"
    HISTORY = "history"  # "did I ever change ...", "以前"
    STATE = "state"  # "where are we", "进展"
    NONE = "none"


_PATTERNS: list[tuple[Intent, re.Pattern[str]]] = [
    (Intent.HISTORY, re.compile(
        r"\b(did (i|we|you) (ever )?(change|update|move|switch)|used to|before (that|it) was|history of|"
        r"how (has|did) .* change|previous(ly)?|what was .* (before|earlier))\b|以前|之前|改过|变过|原来", re.I)),
    (Intent.HOW_TO, re.compile(
        r"\b(how (do|can|should|to) |steps? (to|for)|procedure|what should (i|we) do|best way to|lessons?)\b|"
        r"怎么|怎样|如何|步骤|方法", re.I)),
    (Intent.STATE, re.compile(
        r"\b(where are we|what('s| is) the (status|state)|current (status|state|progress)|what are we (doing|working on)|"
        r"progress)\b|进展|进度|现在在|目前", re.I)),
    (Intent.FACT, re.compile(
        r"\b(what('s| is| are| was| were)|who('s| is| was)|which|when('s| is| was)|where('s| is| was| does| do)|what does)\b|"
        r"是什么|是谁|在哪|哪里|什么时候|多少", re.I)),
]

# Which kinds answer which intent; Search multiplies their score (DESIGN §4: 1.2-1.5x).
INTENT_KINDS: dict[Intent, frozenset[Kind]] = {
    Intent.HOW_TO: frozenset({Kind.PROCEDURE, Kind.LESSON}),
    Intent.FACT: frozenset({Kind.FACT, Kind.PREFERENCE}),
    Intent.HISTORY: frozenset({Kind.FACT, Kind.EVENT}),
    Intent.STATE: frozenset({Kind.SUMMARY, Kind.EVENT}),
    Intent.NONE: frozenset(),
}


def detect_intent(query: str) -> Intent:
    for intent, pattern in _PATTERNS:
        if pattern.search(query):
            return intent
    return Intent.NONE

# Which channel answers which intent; Search multiplies that channel's fusion weight.
INTENT_CHANNELS: dict[Intent, dict[str, float]] = {
    Intent.FACT: {"exact": 2.0},
    Intent.HISTORY: {"exact": 2.0, "time": 1.5},
    Intent.STATE: {"working": 1.5},
    Intent.HOW_TO: {},
    Intent.NONE: {},
}


def routed_weights(intent: Intent, weights: dict[str, float]) -> dict[str, float]:
    """Fusion weights with the intent's channels raised."""
    boost = INTENT_CHANNELS[intent]
    return {**weights, **{ch: weights.get(ch, 1.0) * factor for ch, factor in boost.items()}}
