"""Search: the retrieval channels (services/search/channels.py) and the session's working memory
run concurrently, are fused by weighted reciprocal rank fusion routed by the query's intent,
adjusted (scope, kind intent, recency, confidence), optionally reranked by an LLM, and cut to
top_k and a token budget."""
from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np

from ...core.access.caller import Caller
from ...core.content.screen import explain_tags
from ...core.errors import invalid
from ...core.model import (
    DEFAULT_SCOPE_ORDER,
    Layer,
    MemoryFilter,
    Scope,
    ScoreComponent,
    Scored,
    SearchHit,
)
from ...core.retrieval.intent import detect_intent, routed_weights
from ...core.retrieval.ranking import collapse_duplicates, include_preferences, within_budget
from ...core.retrieval.scoring import Adjustments, fuse_and_adjust
from ...core.retrieval.time_expressions import parse_time_range
from ...core.retrieval.tokens import keyword_tokens, lookup_names, needs_segmenting
from ...core.retrieval.transcript import read_transcript
from ...core.timezones import parse_time_zone
from ...core.validation import MAX_FILTER_VALUES
from ...core.working import SessionContents, item_to_record
from ...llm.chat import went_without
from ...llm.query_rewrite import QueryRewriter
from ...llm.rerank import MAX_CANDIDATES, Reranker
from ...logs import OncePerCause, cause_of
from ...stores.postgres.search.nearest import broad
from ...stores.postgres.search.whole_rows import WholeRows
from ...stores.postgres.session import SessionAhead
from ...stores.redis.working import WorkingSession
from ..deps import Deps
from . import feedback
from .channels import (
    PREFERENCES,
    Plan,
    QueryParts,
    in_order,
    lexical_channels,
    searches_persistent,
    vector_channels,
)
from .graph import CHANNEL as GRAPH
from .graph import GraphChannel, explain_links
from .session import CHANNEL as SESSION
from .session import SessionChannel, explain_sessions
from .signals import keep_nothing_found
from .stages import stage, staged
from .usage import UsageCounts

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchQuery:
    text: str
    filter: MemoryFilter = MemoryFilter()
    top_k: int = 0
    token_budget: int = 0
    as_of: datetime | None = None
    scope_weights: dict[Scope, float] = field(default_factory=dict)
    scope_order: tuple[Scope, ...] = ()
    explain: bool = False
    time_zone: str | None = None


async def _embedded(embeddings: Sequence[Awaitable[np.ndarray]]) -> list[np.ndarray]:
    with stage("embed"):
        return await asyncio.gather(*embeddings)


def _read_whole_by_channels(results: dict[str, list[Scored]], preferences: list[Scored]) -> dict:
    """The memories a channel read whole, by id."""
    return {s.record.id: s.record for scored in (*results.values(), preferences) for s in scored if s.whole}


def _leading(results: dict[str, list[Scored]], preferences: list[Scored], first: int, whole: dict) -> list:
    """The stored memories among each channel's `first` and the preferences always answered that no
    channel read whole."""
    ids = {s.record.id: None for scored in (*(r[:first] for r in results.values()), preferences) for s in scored
           if s.record.layer is not Layer.WORKING and s.record.id not in whole}
    return list(ids)


async def _no_channels() -> dict[str, list[Scored]]:
    return {}


# About 70 words: at most about 2 ms on the event loop when none of them was stemmed before.
INLINE_PARSE_CHARS = 400


class SearchService:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self._background: set[asyncio.Task] = set()
        self.usage = UsageCounts(deps.memories, deps.clock)
        self._failures = OncePerCause(log)
        self.graph = GraphChannel(deps.entities, weight=deps.settings.graph_weight,
                                  max_rows=deps.settings.graph_max_entity_rows)
        self.session = SessionChannel(deps.digests, deps.memories, weight=deps.settings.session_weight,
                                      top_sessions=deps.settings.session_top_sessions)
        self._cores = len(os.sched_getaffinity(0))

    def _check(self, q: SearchQuery) -> int:
        s = self.deps.settings
        if not q.text or not q.text.strip():
            raise invalid("QUERY_REQUIRED", "query must not be empty or blank")
        if len(q.text.encode()) > s.max_query_bytes:
            raise invalid("QUERY_TOO_LARGE", f"query is over {s.max_query_bytes} bytes", limit=str(s.max_query_bytes))
        if "\x00" in q.text:
            raise invalid("INVALID_QUERY", "query must not contain NUL characters")
        if q.top_k < 0 or q.token_budget < 0:
            raise invalid("INVALID_LIMIT", "top_k and token_budget must not be negative")
        if len(q.scope_order) > MAX_FILTER_VALUES:
            raise invalid("INVALID_SCOPE_WEIGHT", f"at most {MAX_FILTER_VALUES} scope weights")
        for weight in q.scope_weights.values():
            if not (weight >= 0 and math.isfinite(weight)):
                raise invalid("INVALID_SCOPE_WEIGHT", "scope weights must be finite non-negative numbers")
        # Above the maximum is capped, not refused: a caller asking for "many" gets the most we give.
        return min(q.top_k or s.search_default_top_k, s.search_max_top_k)

    async def search(self, caller: Caller, q: SearchQuery) -> list[SearchHit]:
        with stage("search"):
            return await self._search(caller, q)

    async def _search(self, caller: Caller, q: SearchQuery) -> list[SearchHit]:
        top_k = self._check(q)
        zone = parse_time_zone(q.time_zone)
        caller.require_tenant()
        settings = self.deps.settings
        now = q.as_of or self.deps.clock()

        transcript = read_transcript(q.text)
        text = transcript.words(settings.search_dialogue_user_only) if transcript else q.text
        feel = " ".join(transcript.feelings()) + "\n" if transcript and settings.search_dialogue_emotion != "off" else ""
        queries = [(feel if settings.search_dialogue_emotion == 'both' else '') + text]
        if transcript:
            queries.append(feel + transcript.focus(settings.search_dialogue_user_turns))
        # Cores the query's embedding leaves to everything else (none: it keeps every core busy, as
        # a long query on the local model's threads does on 2 cores; all of them: a remote model).
        spare = self._cores - max(self.deps.embedder.query_threads(query) for query in queries)
        embedded = asyncio.ensure_future(_embedded([self.deps.embedder.embed_query(query) for query in queries]))
        # With a core beside the embedding the vector channels' session opens while the query is
        # embedded. Without one it would take that core from the embedding: on 2 cores the
        # embedding lost 1.0 ms to it and the channels gained 0.35 (bench/README.md).
        vector_ahead = (self.deps.memories.vector_session_ahead(caller, q.filter)
                        if spare > 0 and searches_persistent(q.filter) else None)
        try:
            return await self._searched(caller, q, top_k, zone, now, text, embedded, spare, vector_ahead)
        finally:
            if vector_ahead is not None:
                await vector_ahead.close()

    async def _searched(self, caller: Caller, q: SearchQuery, top_k: int, zone: ZoneInfo | None, now: datetime,
                        text: str, embedded: asyncio.Future, spare: int,
                        vector_ahead: SessionAhead | None) -> list[SearchHit]:
        settings = self.deps.settings
        limit = max(settings.search_candidates, top_k)

        def read_text():
            tokens = keyword_tokens(text)
            return tokens, lookup_names(text), detect_intent(text), parse_time_range(text, now, zone)

        try:
            with stage("parse"):
                # A question of a few dozen words takes about 0.1 ms: on the event loop. A thread hop
                # costs more than that, and while the query is embedded on every core it waited 0.8
                # ms for one (bench/README.md). Long texts, and Chinese (jieba's first use loads its
                # dictionary), go to a thread.
                inline = len(text) <= INLINE_PARSE_CHARS and not needs_segmenting(text)
                tokens, names, intent, span = read_text() if inline else await asyncio.to_thread(read_text)
        except BaseException:
            embedded.cancel()
            raise
        parts = QueryParts(None, list(dict.fromkeys(tokens)), names, intent, span)
        # The session's working memory is read from Redis while the query is embedded, ranked after.
        working = None
        if q.filter.session_id and q.filter.wants_layer(Layer.WORKING) and q.as_of is None:
            working = asyncio.ensure_future(self.deps.working.read(
                WorkingSession(caller.require_tenant(), caller.agent_id, q.filter.session_id), with_vectors=True))
        meanwhile, apart = self._lexical_timing(caller, q.filter, spare)
        lexical: Plan = {}
        rows: WholeRows | None = None
        if meanwhile:
            lexical, rows = self._lexical_plan(caller, q, parts, limit, top_k, apart=apart)
        running = {name: asyncio.ensure_future(run()) for name, run in lexical.items()}
        try:
            vector, *last_turn = await embedded
        except BaseException:
            for run in (*running.values(), *([working] if working is not None else [])):
                run.cancel()
            if rows is not None:
                rows.close_soon()
            raise
        if not meanwhile:
            lexical, rows = self._lexical_plan(caller, q, parts, limit, top_k, apart=False)
        prefetched: asyncio.Future | None = None
        try:
            if not meanwhile:
                running = {name: asyncio.ensure_future(run()) for name, run in lexical.items()}
            parts = replace(parts, vector=vector, last_turn_vector=last_turn[0] if last_turn else None)
            family = vector_channels(self.deps.memories, settings, caller, q.filter, parts, limit=limit, as_of=q.as_of,
                                     lead=top_k, ahead=vector_ahead)
            planned = bool(family or lexical)  # persistent memory is searched
            runs = in_order({**running, **{name: asyncio.ensure_future(run()) for name, run in family.items()}})
            session_run = asyncio.ensure_future(staged("session channel", self.session.search(
                caller, q.filter, vector, parts.terms, limit=limit, as_of=q.as_of))) if planned and self.session.enabled else None
            if working is not None:
                runs["working"] = asyncio.ensure_future(staged("working channel", self._working_channel(q, working, vector, limit)))
            # Gathered with the channels, so that it is cancelled with them; it answers channels by name.
            rewriting = (staged("rewrite channels", self._rewrite_channels(caller, q, limit))
                         if planned and settings.search_rewrite else _no_channels())
            found, rewritten = await asyncio.gather(asyncio.gather(*runs.values()), rewriting)
            results = dict(zip(runs, found))
            preferences = results.pop(PREFERENCES, [])
            always = [s.record for s in preferences]
            results.update(rewritten)
            weights = routed_weights(intent, settings.channel_weights)
            weights.update({ch: weights.get("rewrite", 1.0) for ch in results if ch.startswith("rewrite")})
            sessions = await session_run if session_run is not None else None
            if sessions is not None:
                results[SESSION], weights[SESSION] = sessions.scored, self.session.weight
            graph = None
            if planned and self.graph.enabled:
                with stage("graph channel"):
                    graph = await self.graph.search(caller, q.filter, text, results, weights, limit=limit, as_of=q.as_of)
                results[GRAPH], weights[GRAPH] = graph.scored, self.graph.weight
            adjustments = Adjustments(
                intent=intent, time_range=span, now=now, recency_lambdas=settings.recency_lambdas,
                scope_weights=q.scope_weights, scope_order=q.scope_order or DEFAULT_SCOPE_ORDER, explain=q.explain,
            )
            # Duplicates are collapsed only as far as a hit can still be answered (top_k, rerank's pool,
            # feedback's documents): past that no content needs normalising.
            ranked = max(top_k, MAX_CANDIDATES if settings.search_rerank else 0, settings.search_feedback_docs)
            # The answer is nearly always among the channels' leading hits: the channels read those
            # whole, and those they did not (the graph's, the sessions') are read while fusion runs (CPU
            # work over a few hundred candidates: in a thread, off the event loop).
            read = _read_whole_by_channels(results, preferences)
            # Fusion lifts into the answer hits no channel read whole (in 102 of 231 LoCoMo searches, most
            # from just past a channel's first top_k): without the lexical channels' session, one opens
            # for them while fusion runs, so that reading them after it is one statement, not four round
            # trips.
            if rows is None and planned and not settings.search_rerank:
                rows = self.deps.memories.whole_rows(caller)
            prefetched = asyncio.ensure_future(self._read_whole(caller, _leading(results, preferences, top_k, read), rows))
            with stage("fusion"):
                hits = await asyncio.to_thread(
                    lambda: collapse_duplicates(fuse_and_adjust(results, weights, adjustments), ranked))
            if planned and feedback.wanted(settings):
                with stage("feedback"):
                    second = await feedback.feedback_channels(self.deps.memories, self.deps.feedback, settings, caller,
                                                              q.filter, parts, hits, limit=limit, as_of=q.as_of)
                    if second:
                        results.update(second)
                        hits = await asyncio.to_thread(
                            lambda: collapse_duplicates(fuse_and_adjust(results, weights, adjustments), ranked))
            whole = {**read, **await prefetched}
            if settings.search_rerank:
                with stage("rerank"):
                    hits = await self._reranked(q.text, hits, top_k, explain=q.explain)
            with stage("finish"):
                hits = include_preferences(hits[:top_k], always, top_k, explain=q.explain)
                hits = within_budget(hits, q.token_budget)
                hits = await self._whole(caller, hits, whole, rows)
                if q.explain:
                    explain_links(hits, graph.why if graph else {})
                    explain_sessions(hits, sessions.why if sessions else {})
                    await self._explain_conflicts(caller, hits)
                    explain_tags(hits)
                if not hits:
                    self._in_background("no-result signal not kept",
                                        keep_nothing_found(self.deps, caller, q.text, q.filter.user_id))
                self.usage.add(caller, [h.memory.stored_id for h in hits if h.memory.layer is not Layer.WORKING])
        except BaseException:
            if prefetched is not None:
                prefetched.cancel()
                await asyncio.gather(prefetched, return_exceptions=True)  # off the session before it ends
            raise
        finally:
            if rows is not None:
                rows.close_soon()
        return hits

    async def _read_whole(self, caller: Caller, ids: list, rows: WholeRows | None = None, *, last: bool = False) -> dict:
        """ids read whole: in rows (left open unless last) when given, else in a session of their own."""
        if not ids:
            return {}
        with stage("whole rows"):
            found = await rows.read(ids, last=last) if rows is not None else await self.deps.memories.get_many(caller, ids)
            return {r.id: r for r in found}

    async def _whole(self, caller: Caller, hits: list[SearchHit], whole: dict,
                     rows: WholeRows | None = None) -> list[SearchHit]:
        """The answered hits read whole (the channels read candidates: what ranking needs): those
        read while fusion ran, and the rest now, in the same session when one was opened for them.
        A hit forgotten since its channel read it is gone from the answer too."""
        stored = [h.memory.id for h in hits if h.memory.layer is not Layer.WORKING]
        missing = [i for i in stored if i not in whole]
        if missing:
            whole = {**whole, **await self._read_whole(caller, missing, rows, last=True)}
        return [h if h.memory.layer is Layer.WORKING else replace(h, memory=whole[h.memory.id])
                for h in hits if h.memory.layer is Layer.WORKING or h.memory.id in whole]

    def _lexical_timing(self, caller: Caller, f: MemoryFilter, spare: int) -> tuple[bool, bool]:
        """Whether the lexical channels run while the query is embedded, and whether apart (each in a
        session of its own, side by side) rather than together in one.

        They need only the query's text, so they run meanwhile on a core the embedding leaves spare.
        When it keeps every core busy, any work beside it slows all of it (a local model's threads
        wait for the slowest at every step): on LoCoMo dev the embedding took 41 ms with the lexical
        channels beside it against 27 ms alone, more than those channels take after it. Except in
        the whole of a big tenant (one the vector channels walk), where they match and rank
        thousands of rows (keyword 19-21 ms, keyword_context 17 ms at 100,000 in one tenant): there
        they run meanwhile and apart, and Search was 2.1-2.4x the floor after the embedding or one
        after the other (bench/README.md). Apart too with more than one core spare; on the one core
        a short query leaves on 2, together, one backend and one session's round trips."""
        big = broad(f) and self.deps.memories.walks.known_big(caller.tenant_id)
        return spare > 0 or big, big or spare > 1

    def _lexical_plan(self, caller: Caller, q: SearchQuery, parts: QueryParts, limit: int, top_k: int, *,
                      apart: bool) -> tuple[Plan, WholeRows | None]:
        """The lexical channels' plan, and the session it leaves open for the answer's whole rows
        (those no channel read whole), which then cost a statement, not a session: none apart, nor
        across a rerank (an LLM call), where it would hold a connection meanwhile."""
        store, settings = self.deps.memories, self.deps.settings
        if apart:
            return lexical_channels(store, settings, caller, q.filter, parts, limit=limit, as_of=q.as_of,
                                    together=False, lead=top_k), None
        shared = rows = None
        if searches_persistent(q.filter) and not settings.search_rerank:
            shared = store.lexical_session_ahead(caller)
            rows = store.whole_rows(caller, shared)
        return lexical_channels(store, settings, caller, q.filter, parts, limit=limit, as_of=q.as_of, lead=top_k,
                                ahead=shared), rows

    async def _explain_conflicts(self, caller: Caller, hits: list[SearchHit]) -> None:
        """A served value that another is waiting to replace says so: the agent should not take it
        as settled."""
        stored = [h for h in hits if h.memory.layer is not Layer.WORKING]
        disputed = await self.deps.conflicts.challengers_of(caller, [h.memory.stored_id for h in stored])
        for hit in stored:
            for challenger in disputed.get(hit.memory.stored_id, []):
                hit.explanation.append(ScoreComponent(
                    "conflict", 0.0, 0, f"disputed by {challenger.id}, which says "
                    f"{(challenger.value or challenger.content)[:200]!r}: needs confirmation (ResolveConflict)"))

    async def _rewrite_channels(self, caller: Caller, q: SearchQuery, limit: int) -> dict[str, list[Scored]]:
        """Nearest memories to each LLM rephrasing of the query; nothing when the model fails."""
        try:
            assert self.deps.llm is not None, "settings refuse search_rewrite without llm_model"
            rewrites = await asyncio.wait_for(
                QueryRewriter(self.deps.llm).rewrite(q.text), self.deps.settings.search_llm_timeout_seconds)
            vectors = [await self.deps.embedder.embed_query(text) for text in rewrites]
        except Exception as exc:  # an optional stage: the search goes on without it
            if reason := went_without("query_rewrite", exc):
                log.debug("query rewrite skipped (%s), searching without it", reason)
            else:
                log.warning("query rewrite failed, searching without it: %s", exc)
            return {}
        found = await asyncio.gather(*(
            self.deps.memories.vector_search(caller, q.filter, v, limit=limit, as_of=q.as_of) for v in vectors))
        return {f"rewrite{i}": scored for i, scored in enumerate(found, 1)}

    async def _reranked(self, text: str, hits: list[SearchHit], top_k: int, *, explain: bool) -> list[SearchHit]:
        """The LLM orders the leading candidates; hits keep the scores of the places they take, so
        scores still fall down the list. On failure the fused order stands."""
        pool = hits[:MAX_CANDIDATES]
        try:
            assert self.deps.llm is not None, "settings refuse search_rerank without llm_model"
            order = await asyncio.wait_for(
                Reranker(self.deps.llm).rerank(text, [(str(h.memory.id), h.memory.content) for h in pool], len(pool)),
                self.deps.settings.search_llm_timeout_seconds)
        except Exception as exc:  # an optional stage: the fused order is a fine answer
            if reason := went_without("rerank", exc):
                log.debug("rerank skipped (%s), keeping the fused order", reason)
            else:
                log.warning("rerank failed, keeping the fused order: %s", exc)
            return hits
        by_id = {str(h.memory.id): h for h in pool}
        reranked = []
        for place, memory_id in enumerate(order):
            hit = by_id[memory_id]
            note = [ScoreComponent("rerank", pool[place].score, place + 1, f"LLM rerank, was #{pool.index(hit) + 1}")]
            reranked.append(SearchHit(hit.memory, pool[place].score, hit.explanation + note if explain else []))
        return reranked + hits[MAX_CANDIDATES:]

    async def _working_channel(self, q: SearchQuery, reading: Awaitable[SessionContents], query_vector: np.ndarray,
                               limit: int) -> list[Scored]:
        f = q.filter
        contents = await reading
        items = [
            i for i in contents.items
            if i.id in contents.vectors
            and (not f.kinds or i.kind in f.kinds)
            and (not f.user_id or i.user_id == f.user_id)
            and set(f.tags) <= set(i.tags)
        ]
        if not items:
            return []
        vectors = np.stack([contents.vectors[i.id] for i in items])
        similarities = vectors @ query_vector
        order = np.argsort(-similarities)[:limit]
        return [Scored(item_to_record(items[i]), float(similarities[i])) for i in order]

    def _in_background(self, failure: str, work) -> None:
        """Bookkeeping the caller should not wait for; its failures are logged once per cause."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

        def report(done: asyncio.Task) -> None:
            exc = None if done.cancelled() else done.exception()
            if exc is not None:
                self._failures.log(cause_of(exc), f"{failure}: %s", type(exc).__name__,
                                   level=logging.WARNING, exc_info=False)

        task.add_done_callback(report)
