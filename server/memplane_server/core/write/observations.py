"""Rules for a memory observed again: when two are the same, how belief grows, what to lock."""
from __future__ import annotations

import hashlib
import re
import unicodedata

from ..model import Kind, MemoryDraft, Scope

# Kinds whose near-duplicates merge at write time. Turns and events are episodes: two people
# saying "thanks!" in different sessions are two things that happened, not one.
DEDUP_KINDS = frozenset({Kind.FACT, Kind.PREFERENCE, Kind.PROCEDURE, Kind.LESSON})

# A statement's words, in order: a CJK ideograph is a word of its own (Chinese is written without
# spaces, so spacing between ideographs says nothing), any other run of letters and digits is one
# word, and every other visible character is a word too (so "1,000" is not "1000", "3.5" not "35").
_WORD = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[^\w\s]")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
# Punctuation that ends a statement without changing it; "?" is left out, a question is not the
# statement it asks about.
_ENDINGS = frozenset(".!;\u3002\uff61")


def statement_key(text: str | None) -> str:
    """What a text states, for telling a repeat from another statement: every word is kept
    (function words, numbers, units, names and negations carry the meaning: "on" is not "off",
    "from Berlin" not "to Berlin", 前 not 后); only letter case, spacing, full-width forms, curly
    quotes and the closing full stop or exclamation mark are not. Two texts with the same key state
    the same thing; any other pair is kept apart, since a missed merge costs a row and a wrong one
    loses a fact."""
    words = _WORD.findall(unicodedata.normalize("NFKC", text or "").translate(_QUOTES).casefold())
    while words and words[-1] in _ENDINGS:
        words.pop()
    return " ".join(words)


def same_statement(a: str | None, b: str | None) -> bool:
    return statement_key(a) == statement_key(b)


def sameness(a: str, b: str) -> str:
    """Why two texts with one statement_key are the same statement, for the Write answer."""
    return "the same text" if a == b else "the same words, differing only in case, spacing or punctuation"


def reobserved_confidence(old: float, new: float) -> float:
    """Noisy-OR: two independent observations are more believable than either alone."""
    return round(1 - (1 - old) * (1 - new), 6)


def owner_key(tenant_id: str, draft: MemoryDraft) -> tuple[str, ...]:
    """Whose memory space a draft lands in: a domain is shared by its member tenants."""
    assert draft.scope is not None
    if draft.scope is Scope.DOMAIN:
        return ("domain", draft.domain or "")
    if draft.scope is Scope.PRIVATE:
        return ("private", tenant_id, draft.agent_id or "")
    return ("global", tenant_id)


def lock_id(*parts: str) -> int:
    """A signed 64-bit advisory lock id for a tuple of strings."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def write_lock(tenant_id: str, draft: MemoryDraft) -> int | None:
    """The lock that makes concurrent writers of the same fact or the same kind take turns."""
    assert draft.kind is not None
    owner = owner_key(tenant_id, draft)
    if draft.entity and draft.attribute:
        return lock_id("fact", *owner, draft.entity, draft.attribute)
    if draft.kind in DEDUP_KINDS:
        return lock_id("dedup", *owner, draft.kind.value)
    return None
