"""The retrieval channels of Search, each one query of the store. Search runs the plan
concurrently and fuses the rankings; benchmarks run the same plan to time the SQL that a
search cannot avoid."""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from ..core.bm25 import best_matches
from ..core.caller import Caller
from ..core.intent import Intent
from ..core.model import Kind, Layer, MemoryFilter, Status
from ..core.ranking import ALWAYS_PREFERENCES
from ..core.time_expressions import TimeRange
from ..settings import Settings
from ..core.model import Scored
from ..stores.postgres.memories import MemoryStore

# The keyword channels read this many times their share of candidates (their tokens only), so
# that BM25's term statistics see the common words for what they are before the list is cut.
KEYWORD_POOL = 4
PREFERENCES = "preferences"


@dataclass(frozen=True)
class QueryParts:
    """What the query text gives, worked out once per search."""

    vector: np.ndarray
    terms: list[str]  # distinct keyword tokens, for the keyword channels
    names: list[str]  # for the exact channel
    intent: Intent
    time_range: TimeRange | None
    last_turn_vector: np.ndarray | None = None  # when the query is a transcript (core/transcript.py)


Plan = dict[str, Callable[[], Awaitable[list[Scored]]]]


def within(f: MemoryFilter, span: TimeRange) -> MemoryFilter | None:
    """The filter narrowed to the span; None when they do not overlap."""
    after = max(filter(None, (f.occurred_after, span.start)))
    before = min(filter(None, (f.occurred_before, span.end)))
    return replace(f, occurred_after=after, occurred_before=before) if after < before else None


def plan_channels(
    store: MemoryStore, settings: Settings, caller: Caller, f: MemoryFilter, parts: QueryParts, *,
    limit: int, as_of: datetime | None,
) -> Plan:
    """The persistent-memory channels this query runs (working memory is searched apart)."""
    if f.layers and all(layer is Layer.WORKING for layer in f.layers):
        return {}
    plan: Plan = {}
    # Only turns have windows (services/context.py): a filter without them finds none there.
    turns = (not f.kinds or Kind.TURN in f.kinds) and (not f.layers or Layer.EPISODIC in f.layers)
    for suffix, windows in (("", False), ("_context", True)):
        if windows and not (settings.context_window and turns):
            continue
        plan[f"vector{suffix}"] = lambda w=windows: store.vector_search(
            caller, f, parts.vector, limit=limit, as_of=as_of, windows=w)
        if parts.terms:
            plan[f"keyword{suffix}"] = lambda w=windows: store.keyword_search(
                caller, f, parts.terms, pool=limit * KEYWORD_POOL, as_of=as_of, windows=w,
                choose=lambda matches: best_matches(parts.terms, matches, limit),
                common_share=settings.keyword_common_share)
    if parts.last_turn_vector is not None:
        plan["last_turn"] = lambda: store.vector_search(caller, f, parts.last_turn_vector, limit=limit, as_of=as_of)
    if parts.names:
        facts, valid = f, None
        if (parts.intent is Intent.HISTORY or parts.time_range is not None) and not f.statuses:
            # "Did I change X?" is answered by the versions that were replaced, too; so is "what
            # was X in 2022?", which asks for the version valid then.
            facts = replace(f, statuses=(Status.ACTIVE, Status.PENDING, Status.SUPERSEDED))
            valid = parts.time_range
        plan["exact"] = lambda: store.fact_lookup(caller, facts, parts.names, limit=limit, as_of=as_of, valid=valid)
    if parts.time_range is not None and (spanned := within(f, parts.time_range)) is not None:
        plan["time"] = lambda: store.vector_search(caller, spanned, parts.vector, limit=limit, as_of=as_of)
    if not f.kinds or Kind.PREFERENCE in f.kinds:
        # Not a ranking: the closest preferences are always in the answer (core/ranking.py).
        plan[PREFERENCES] = lambda: store.vector_search(
            caller, replace(f, kinds=(Kind.PREFERENCE,)), parts.vector, limit=ALWAYS_PREFERENCES, as_of=as_of)
    return plan
