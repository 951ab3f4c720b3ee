"""What Search does to a ranked list after fusion: collapse repeats, make room for preferences,
cut to a token budget."""
from __future__ import annotations

from ..model import MemoryRecord, ScoreComponent, SearchHit
from ..write.observations import statement_key

ALWAYS_PREFERENCES = 3


def collapse_duplicates(hits: list[SearchHit], limit: int | None = None) -> list[SearchHit]:
    """Keeps the best of hits that say the same thing (same kind, the same statement_key), the first
    `limit` of them (all when None): what is answered needs no normalising past that."""
    seen: set[tuple[str, str]] = set()
    kept: list[SearchHit] = []
    for hit in hits:
        if limit is not None and len(kept) == limit:
            break
        key = (hit.memory.kind.value, statement_key(hit.memory.content))
        if key not in seen:
            seen.add(key)
            kept.append(hit)
    return kept


def include_preferences(
    hits: list[SearchHit], preferences: list[MemoryRecord], top_k: int, *, explain: bool
) -> list[SearchHit]:
    """Preferences in scope are always in the answer (DESIGN §4): the closest few take the last
    places if ranking left them out."""
    present = {str(h.memory.id) for h in hits}
    missing = [p for p in preferences if str(p.id) not in present][: min(ALWAYS_PREFERENCES, top_k)]
    if not missing:
        return hits
    floor = min((h.score for h in hits), default=0.0)
    kept = hits[: max(0, top_k - len(missing))]
    extra = [
        SearchHit(p, floor, [ScoreComponent("preference_floor", floor, 0, "preferences in scope are always included")]
                  if explain else [])
        for p in missing
    ]
    return kept + extra


def approx_tokens(text: str) -> int:
    # About four characters a token for English; CJK runs closer to one a character, so
    # take the larger estimate to stay inside the caller's budget.
    cjk = sum(1 for ch in text if "\u3400" <= ch <= "\u9fff")
    return max(len(text) // 4, cjk) + 1


def within_budget(hits: list[SearchHit], budget: int) -> list[SearchHit]:
    """The leading hits that fit in the token budget (0 = no budget); the first always fits."""
    if not budget:
        return hits
    kept: list[SearchHit] = []
    used = 0
    for hit in hits:
        cost = approx_tokens(hit.memory.content)
        if kept and used + cost > budget:
            break
        kept.append(hit)
        used += cost
    return kept
