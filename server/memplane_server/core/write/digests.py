"""Session digests: what a session was about, told without a model, so a search
can pick the sessions worth looking into before their turns ("what happened around the move"
reaches the session before the turn).

A digest covers one session's active turns of one visibility (scope, domain, agent: the groups of
core/write/windows.py), so it never carries text a reader of those turns could not read. It holds the
session's rarer keyphrases (its keyword tokens by how many turns hold them and how rare they are in
the tenant: stores/postgres/search/keyword_stats.py), its entities (core/write/entities.py), and a vector: the
mean of its turns' own vectors (no embedding work), or the embedding of a model-written digest.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby

import numpy as np

from ..retrieval.tokens import keyword_tokens
from .entities import extract_entities
from .windows import SessionTurn

MAX_KEYPHRASES = 32
MAX_DIGEST_ENTITIES = 32
# Terms rarer than the statistics record (stores/postgres/search/keyword_stats.py FLOOR_SHARE) count as
# this share of the tenant's rows.
UNLISTED_SHARE = 0.005
MAX_DIGEST_CHARS = 2000


@dataclass(frozen=True)
class Digest:
    session_id: str
    group: tuple  # (scope, domain, agent_id)
    keyphrases: tuple[str, ...]
    entities: tuple[str, ...]
    text: str  # what the keyword match reads and explain shows
    vector: np.ndarray | None
    turns: int
    first_at: datetime | None
    last_at: datetime | None
    written_by: str = ""  # the chat model that wrote `text`, "" when built without one


def keyphrases(texts: list[str], common: dict[str, float], limit: int = MAX_KEYPHRASES) -> list[str]:
    """The session's keyword tokens, best first: (1 + log of the turns holding it) times its rarity
    in the tenant (log of 1 / share of rows holding it). A term every row holds weighs nothing; a
    term said once in a long session can still lead when nothing else names it."""
    held = Counter(t for text in texts for t in set(keyword_tokens(text)))
    scored = []
    for term, turns in held.items():
        rarity = -math.log(min(max(common.get(term, UNLISTED_SHARE), 1e-6), 1.0))
        if rarity > 0:
            scored.append(((1 + math.log(turns)) * rarity, term))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [term for _, term in scored[:limit]]


def session_entities(texts: list[str], limit: int = MAX_DIGEST_ENTITIES) -> list[str]:
    """The entities the session's turns name, the most often named first (first named breaks ties)."""
    counts = Counter(e for text in texts for e in extract_entities(text))
    return [e for e, _ in counts.most_common(limit)]


def digest_text(entities: list[str], phrases: list[str]) -> str:
    return f"entities: {', '.join(entities)}\nkeyphrases: {', '.join(phrases)}"[:MAX_DIGEST_CHARS]


def mean_vector(turns: list[SessionTurn]) -> np.ndarray | None:
    """The normalised mean of the turns' own vectors; None when a turn has none yet."""
    vectors = [t.vector for t in turns if t.vector is not None]
    if not turns or len(vectors) < len(turns):
        return None
    mean = np.mean(np.stack(vectors), axis=0)
    norm = float(np.linalg.norm(mean))
    return (mean / norm).astype(np.float32) if norm else None


def build_digests(session_id: str, turns: list[SessionTurn], common: dict[str, float]) -> list[Digest]:
    """One digest per visibility group of the session's turns (`turns` in session order, as
    ContextStore.session_turns reads them)."""
    out = []
    for group, members in groupby(turns, key=lambda t: t.group):
        run = list(members)
        texts = [t.content for t in run]
        entities, phrases = session_entities(texts), keyphrases(texts, common)
        times = [t.occurred_at for t in run if t.occurred_at is not None]
        out.append(Digest(session_id, group, tuple(phrases), tuple(entities), digest_text(entities, phrases),
                          mean_vector(run), len(run), min(times, default=None), max(times, default=None)))
    return out


def digest_keywords(digest: Digest) -> str:
    """The tokens the keyword match of the session channel reads: the keyphrases (tokens already),
    the entities' words, and a model-written digest's words."""
    words = list(digest.keyphrases) + keyword_tokens(" ".join(digest.entities))
    if digest.written_by:
        words += keyword_tokens(digest.text)
    return " ".join(dict.fromkeys(words))
