"""The retrieval channels of Search, each one query of the store. Search runs the plan
concurrently (the lexical channels from when the query's text is read, the vector-family ones
from when it is embedded) and fuses the rankings; benchmarks run the same plan to time the SQL
that a search cannot avoid. Channels read candidates (what ranking needs of a memory), and whole
their `lead` first (Search's top_k: nearly always where its answer is), so that Search reads whole
only the answered hits they did not."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Generic, TypeVar

import numpy as np

from ...core.access.caller import Caller
from ...core.model import Kind, Layer, MemoryFilter, Scored, Status
from ...core.retrieval.intent import Intent
from ...core.retrieval.ranking import ALWAYS_PREFERENCES
from ...core.retrieval.time_expressions import TimeRange
from ...stores.postgres.memories import MemoryStore
from ...stores.postgres.search.lexical import FactQuery, KeywordQuery
from ...stores.postgres.search.nearest import VectorQuery
from ...stores.postgres.search.reads import SearchReads
from .deps import SearchSettings
from .stages import staged

# The keyword channels read this many times their share of candidates (their tokens only), so
# that BM25's term statistics see the common words for what they are before the list is cut.
KEYWORD_POOL = 4
PREFERENCES = "preferences"
CHANNEL_ORDER = ("vector", "keyword", "vector_context", "keyword_context", "last_turn", "exact", "time", PREFERENCES)
T = TypeVar("T")
Q = TypeVar("Q")


@dataclass(frozen=True)
class QueryParts:
    """What the query text gives, worked out once per search."""

    vector: np.ndarray | None  # None while the query is being embedded (the lexical channels need none)
    terms: list[str]  # distinct keyword tokens, for the keyword channels
    names: list[str]  # for the exact channel
    intent: Intent
    time_range: TimeRange | None
    last_turn_vector: np.ndarray | None = None  # when the query is a transcript (core/retrieval/transcript.py)


Plan = dict[str, Callable[[], Awaitable[list[Scored]]]]


class SessionBatch(Generic[Q]):
    """Channels started together (in one turn of the event loop, as Search starts its plan) run in
    one store call, in one session: each channel alone paid BEGIN, the caller's settings, COMMIT and
    a pooled connection, and built its own records of the memories the others found too. A channel
    started alone (benchmarks time them one by one) runs alone."""

    def __init__(self, name: str, run: Callable[[list[Q]], Awaitable[list[list[Scored]]]]) -> None:
        self._name = name  # of its stage (services/search/stages.py)
        self._run = run
        self._waiting: list[tuple[Q, asyncio.Future[list[Scored]]]] = []
        self._running: set[asyncio.Task] = set()

    async def search(self, query: Q) -> list[Scored]:
        loop = asyncio.get_running_loop()
        if not self._waiting:
            loop.call_soon(self._start)
        answer: asyncio.Future[list[Scored]] = loop.create_future()
        self._waiting.append((query, answer))
        return await answer

    def _start(self) -> None:
        batch, self._waiting = self._waiting, []
        task = asyncio.ensure_future(staged(self._name, self._run([q for q, _ in batch])))
        self._running.add(task)

        def answer(done: asyncio.Task) -> None:
            self._running.discard(done)
            error = None if done.cancelled() else done.exception()  # retrieved even if no channel waits
            for i, (_, future) in enumerate(batch):
                if future.done():  # its channel was cancelled
                    continue
                if done.cancelled():
                    future.cancel()
                elif error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(done.result()[i])

        def abandoned(_future: asyncio.Future) -> None:
            if all(future.cancelled() for _, future in batch):
                task.cancel()

        task.add_done_callback(answer)
        for _, future in batch:
            future.add_done_callback(abandoned)


def within(f: MemoryFilter, span: TimeRange) -> MemoryFilter | None:
    """The filter narrowed to the span; None when they do not overlap."""
    after = max(filter(None, (f.occurred_after, span.start)))
    before = min(filter(None, (f.occurred_before, span.end)))
    return replace(f, occurred_after=after, occurred_before=before) if after < before else None


def plan_channels(
    store: MemoryStore, settings: SearchSettings, caller: Caller, f: MemoryFilter, parts: QueryParts, *,
    limit: int, as_of: datetime | None, lead: int = 0,
) -> Plan:
    """The persistent-memory channels this query runs (working memory is searched apart), each in a
    session of its own; each reads its `lead` first candidates whole. What benchmarks and tests time."""
    reads = SearchReads(store, caller, f)
    return in_order({**vector_channels(reads, settings, parts, limit=limit, as_of=as_of, lead=lead),
                     **lexical_channels(reads, settings, parts, limit=limit, as_of=as_of, lead=lead)})


def in_order(channels: dict[str, T]) -> dict[str, T]:
    """The channels in the order Search has always fused them: fusion sums each memory's shares in
    that order, so its scores (and its ties) are the same to the last bit however the channels were
    started."""
    return {**{name: channels[name] for name in CHANNEL_ORDER if name in channels}, **channels}


def searches_persistent(f: MemoryFilter) -> bool:
    """Whether the filter reaches persistent memory (any channel but the working one)."""
    return not (f.layers and all(layer is Layer.WORKING for layer in f.layers))


def _searched(settings: SearchSettings, f: MemoryFilter) -> tuple[bool, bool]:
    """Whether the filter reaches persistent memory at all, and turn windows."""
    if not searches_persistent(f):
        return False, False
    # Only turns have windows (services/write/context.py): a filter without them finds none there.
    turns = (not f.kinds or Kind.TURN in f.kinds) and (not f.layers or Layer.EPISODIC in f.layers)
    return True, bool(settings.context_window and turns)


def lexical_channels(
    reads: SearchReads, settings: SearchSettings, parts: QueryParts, *,
    limit: int, as_of: datetime | None, together: bool = True, lead: int = 0,
) -> Plan:
    """The channels that need only the query's text (its tokens and names), not its vectors; started
    together, they run in one session (the one `reads` opened for them, if any), apart in a session each."""
    f = reads.filter
    persistent, windows = _searched(settings, f)
    plan: Plan = {}
    if not persistent:
        return plan
    shared: SessionBatch[KeywordQuery | FactQuery] = SessionBatch("lexical SQL", reads.lexical_searches)

    def batch() -> SessionBatch[KeywordQuery | FactQuery]:
        # Apart, each channel has a session of its own and PostgreSQL runs their statements side by
        # side: what a big tenant's keyword channels need to fit under the query's embedding.
        return shared if together else SessionBatch(
            "lexical SQL", lambda queries: reads.lexical_searches(queries, in_shared=False))

    def keyword(in_windows: bool) -> Awaitable[list[Scored]]:
        return batch().search(KeywordQuery(
            f, parts.terms, limit * KEYWORD_POOL, as_of, limit, windows=in_windows,
            common_share=settings.keyword_common_share, lead=lead))
    if parts.terms:
        plan["keyword"] = lambda: keyword(False)
        if windows:
            plan["keyword_context"] = lambda: keyword(True)
    if parts.names:
        facts, valid = f, None
        if (parts.intent is Intent.HISTORY or parts.time_range is not None) and not f.statuses:
            # "Did I change X?" is answered by the versions that were replaced, too; so is "what
            # was X in 2022?", which asks for the version valid then.
            facts = replace(f, statuses=(Status.ACTIVE, Status.PENDING, Status.SUPERSEDED))
            valid = parts.time_range
        plan["exact"] = lambda: batch().search(FactQuery(facts, parts.names, limit, as_of, valid, lead))
    return plan


def vector_channels(
    reads: SearchReads, settings: SearchSettings, parts: QueryParts, *, limit: int, as_of: datetime | None, lead: int = 0,
) -> Plan:
    """The channels that read the query's vectors; started together, they run as one statement (in
    the session `reads` opened for them, if any)."""
    f = reads.filter
    persistent, windows = _searched(settings, f)
    plan: Plan = {}
    if not persistent:
        return plan
    vector = parts.vector
    assert vector is not None, "planned once the query is embedded"
    batch: SessionBatch[VectorQuery] = SessionBatch("vector SQL", reads.vector_searches)
    plan["vector"] = lambda: batch.search(VectorQuery(f, vector, limit, as_of, lead=lead))
    if windows:
        plan["vector_context"] = lambda: batch.search(VectorQuery(f, vector, limit, as_of, True, lead))
    if (last_turn := parts.last_turn_vector) is not None:
        plan["last_turn"] = lambda: batch.search(VectorQuery(f, last_turn, limit, as_of, lead=lead))
    if parts.time_range is not None and (spanned := within(f, parts.time_range)) is not None:
        plan["time"] = lambda: batch.search(VectorQuery(spanned, vector, limit, as_of, lead=lead))
    if not f.kinds or Kind.PREFERENCE in f.kinds:
        # Not a ranking: the closest preferences are always in the answer (core/retrieval/ranking.py).
        plan[PREFERENCES] = lambda: batch.search(
            VectorQuery(replace(f, kinds=(Kind.PREFERENCE,)), vector, ALWAYS_PREFERENCES, as_of,
                        lead=ALWAYS_PREFERENCES if lead else 0))
    return plan
