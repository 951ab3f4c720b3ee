"""Rules for a memory observed again: when two are the same, how belief grows, what to lock."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ..model import Kind, MemoryDraft, Scope
from ..retrieval.tokens import keyword_tokens

# Kinds whose near-duplicates merge at write time. Turns and events are episodes: two people
# saying "thanks!" in different sessions are two things that happened, not one.
DEDUP_KINDS = frozenset({Kind.FACT, Kind.PREFERENCE, Kind.PROCEDURE, Kind.LESSON})

_SPACE = re.compile(r"\s+")


def normalized(text: str | None) -> str:
    return _SPACE.sub(" ", (text or "").casefold()).strip().rstrip(".!。！")


# Negations are stopwords to the keyword channels, but "does not like tea" is no restatement of
# "likes tea". Chinese negators are single characters inside words, so they are looked for as such.
_NEGATION = re.compile(
    r"\b(?:no|not|nor|never|none|nothing|nobody|neither|cannot|\w+n't)\b|[不没別别未无]", re.IGNORECASE)


@dataclass(frozen=True)
class Claim:
    """What a text says, for telling a restatement from a different statement that embeds alike:
    with the small embedder "prefers dark mode" and "prefers light mode" measure cosine 0.963 and
    "Bob's dog is named Rex" and "Bob's cat is named Rex" 0.957, above the near-duplicate threshold."""

    terms: frozenset[str]
    negated: bool

    def adds_nothing_to(self, other: Claim) -> bool:
        return self.terms <= other.terms and self.negated == other.negated


def claim(text: str) -> Claim:
    return Claim(frozenset(keyword_tokens(text)), bool(_NEGATION.search(text.replace("’", "'"))))


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
