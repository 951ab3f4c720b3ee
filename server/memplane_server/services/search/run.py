"""One search as a run of named stages, from its text to its answer (`SearchRun.answer` lists them in
their order). The run owns what its stages start: the query's embedding, the read of the session's
working memory, the channels' tasks and the store's reads with the sessions they run in
(SearchReads), and ends whatever is still going in one place (`close`), whether the search
answered, failed or was cancelled. Each stage is marked with the name the benchmarks print
(services/search/stages.py)."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from ...core.access.caller import Caller
from ...core.content.screen import explain_tags
from ...core.model import DEFAULT_SCOPE_ORDER, Layer, ScoreComponent, Scored, SearchHit
from ...core.retrieval.intent import Intent, detect_intent, routed_weights
from ...core.retrieval.ranking import collapse_duplicates, include_preferences, within_budget
from ...core.retrieval.scoring import Adjustments, fuse_and_adjust
from ...core.retrieval.time_expressions import parse_time_range
from ...core.retrieval.tokens import keyword_tokens, lookup_names, needs_segmenting
from ...core.retrieval.transcript import read_transcript
from ...core.timezones import parse_time_zone
from ...llm.rerank import MAX_CANDIDATES
from ...stores.postgres.search.reads import SearchReads
from ...stores.redis.working import WorkingSession
from . import feedback
from .channels import PREFERENCES, QueryParts, in_order, lexical_channels, searches_persistent, vector_channels
from .deps import SearchDeps, SearchSettings
from .graph import CHANNEL as GRAPH
from .graph import GraphChannel, GraphResult, explain_links
from .model_stages import reranked, rewrite_channels
from .query import SearchQuery
from .session import CHANNEL as SESSION
from .session import SessionChannel, SessionResult, explain_sessions
from .signals import keep_nothing_found
from .stages import stage, staged
from .usage import UsageCounts
from .working import working_channel


class Searcher(Protocol):
    """What a run uses of the service that starts it (services/search/service.py)."""

    deps: SearchDeps
    graph: GraphChannel
    session: SessionChannel
    usage: UsageCounts
    cores: int

    def in_background(self, failure: str, work: Awaitable[Any]) -> None: ...

# About 70 words: at most about 2 ms on the event loop when none of them was stemmed before.
INLINE_PARSE_CHARS = 400


def query_texts(settings: SearchSettings, text: str) -> tuple[str, list[str]]:
    """The words searched (a transcript's, as the dialogue settings pick them) and the texts embedded:
    those words, and for a transcript its focus too (the `last_turn` channel)."""
    transcript = read_transcript(text)
    if transcript is None:
        return text, [text]
    words = transcript.words(settings.search_dialogue_user_only)
    feel = " ".join(transcript.feelings()) + "\n" if settings.search_dialogue_emotion != "off" else ""
    return words, [(feel if settings.search_dialogue_emotion == "both" else "") + words,
                   feel + transcript.focus(settings.search_dialogue_user_turns)]


@dataclass
class Found:
    """What the channels found, by channel, with their fusion weights."""

    results: dict[str, list[Scored]]
    weights: dict[str, float]
    always: list[Scored]  # the closest preferences, answered whatever their rank
    sessions: SessionResult | None = None
    graph: GraphResult | None = None
    read: dict = field(default_factory=dict)  # memories the channels read whole, by id


class SearchRun:
    def __init__(self, service: Searcher, caller: Caller, q: SearchQuery, top_k: int) -> None:
        self.service, self.deps, self.settings = service, service.deps, service.deps.settings
        self.caller, self.q, self.top_k = caller, q, top_k
        self.zone = parse_time_zone(q.time_zone)
        caller.require_tenant()
        self.now = q.as_of or self.deps.clock()
        self.limit = max(self.settings.search_candidates, top_k)
        self.reads = SearchReads(self.deps.memories, caller, q.filter)
        self.text, self.embedded_texts = query_texts(self.settings, q.text)
        self.started: list[asyncio.Future] = []  # ended by close while still running
        self.lexical: dict[str, asyncio.Future] = {}
        self.lexical_started = False
        self.working: asyncio.Future | None = None
        self.parts = QueryParts(None, [], [], Intent.NONE, None)  # read by parse
        self.spare = 0  # cores the query's embedding leaves to the rest (set by embed)
        self.planned = False  # persistent memory is searched

    async def answer(self) -> list[SearchHit]:
        try:
            embedding = self.embed()
            await self.parse()
            self.read_working()
            self.start_lexical_meanwhile()
            await self.embedded(embedding)
            found = await self.channels()
            hits, reading = await self.fusion(found)
            hits = await self.feedback(found, hits)
            whole = {**found.read, **await reading}
            return await self.finish(found, await self.rerank(hits), whole)
        finally:
            await self.close()

    def start(self, work: Awaitable[Any]) -> asyncio.Future:
        task = asyncio.ensure_future(work)
        self.started.append(task)
        return task

    def embed(self) -> asyncio.Future:
        """The query's texts sent to the embedder; with a core beside the embedding the vector
        channels' session opens meanwhile. Without one it would take that core from the embedding:
        on 2 cores the embedding lost 1.0 ms to it and the channels gained 0.35 (bench/README.md)."""
        embedder = self.deps.embedder
        # Cores the embedding leaves to everything else (none: it keeps every core busy, as a long
        # query on the local model's threads does on 2 cores; all of them: a remote model).
        self.spare = self.service.cores - max(embedder.query_threads(text) for text in self.embedded_texts)

        async def embedding() -> list[np.ndarray]:
            with stage("embed"):
                return await asyncio.gather(*(embedder.embed_query(text) for text in self.embedded_texts))
        task = self.start(embedding())
        if self.spare > 0 and searches_persistent(self.q.filter):
            self.reads.open_vector_session()
        return task

    async def parse(self) -> None:
        """The query's keywords, names, intent and time span. A question of a few dozen words takes
        about 0.1 ms: on the event loop. A thread hop costs more than that, and while the query is
        embedded on every core it waited 0.8 ms for one (bench/README.md). Long texts, and Chinese
        (jieba's first use loads its dictionary), go to a thread."""
        text, now, zone = self.text, self.now, self.zone

        def read_text() -> QueryParts:
            return QueryParts(None, list(dict.fromkeys(keyword_tokens(text))), lookup_names(text), detect_intent(text),
                              parse_time_range(text, now, zone))
        with stage("parse"):
            inline = len(text) <= INLINE_PARSE_CHARS and not needs_segmenting(text)
            self.parts = read_text() if inline else await asyncio.to_thread(read_text)

    def read_working(self) -> None:
        """The session's working memory, read from Redis while the query is embedded (ranked after)."""
        f = self.q.filter
        if f.session_id and f.wants_layer(Layer.WORKING) and self.q.as_of is None:
            self.working = self.start(self.deps.working.read(
                WorkingSession(self.caller.require_tenant(), self.caller.agent_id, f.session_id), with_vectors=True))

    def start_lexical_meanwhile(self) -> None:
        """The lexical channels need only the query's text, so they run while it is embedded on a
        core the embedding leaves spare. When it keeps every core busy, any work beside it slows all
        of it (a local model's threads wait for the slowest at every step): on LoCoMo dev the
        embedding took 41 ms with the lexical channels beside it against 27 ms alone, more than those
        channels take after it. Except in the whole of a big tenant (one the vector channels walk),
        where they match and rank thousands of rows (keyword 19-21 ms, keyword_context 17 ms at
        100,000 in one tenant): there they run meanwhile and apart, each in a session of its own,
        and Search was 2.1-2.4x the floor after the embedding or one after the other
        (bench/README.md). Apart too with more than one core spare; on the one core a short query
        leaves on 2, together: one backend and one session's round trips."""
        big = self.reads.tenant_walked_whole()
        if self.spare > 0 or big:
            self.start_lexical(apart=big or self.spare > 1)

    def start_lexical(self, *, apart: bool) -> None:
        """Together, the lexical channels' session is left open for the answer's whole rows (those no
        channel read whole), which then cost a statement, not a session; not across a rerank (an LLM
        call), where it would hold a connection meanwhile."""
        self.lexical_started = True
        if not apart and searches_persistent(self.q.filter) and not self.settings.search_rerank:
            self.reads.open_lexical_session()
        plan = lexical_channels(self.reads, self.settings, self.parts, limit=self.limit, as_of=self.q.as_of,
                                together=not apart, lead=self.top_k)
        self.lexical = {name: self.start(run()) for name, run in plan.items()}

    async def embedded(self, embedding: Awaitable[list[np.ndarray]]) -> None:
        vector, *last_turn = await embedding
        self.parts = replace(self.parts, vector=vector, last_turn_vector=last_turn[0] if last_turn else None)
        if not self.lexical_started:
            self.start_lexical(apart=False)

    async def channels(self) -> Found:
        """Every channel, run concurrently: the lexical ones already started, the vector family, the
        sessions', the working memory's and the rewrites'; then the graph's, which follows the
        entities of what the others found."""
        q, settings = self.q, self.settings
        family = vector_channels(self.reads, settings, self.parts, limit=self.limit, as_of=q.as_of, lead=self.top_k)
        self.planned = bool(family or self.lexical)
        runs = in_order({**self.lexical, **{name: self.start(run()) for name, run in family.items()}})
        session, vector = self.service.session, self.parts.vector
        assert vector is not None, "set by embedded"
        sessions = self.start(staged("session channel", session.search(
            self.caller, q.filter, vector, self.parts.terms, limit=self.limit, as_of=q.as_of,
        ))) if self.planned and session.enabled else None
        if self.working is not None:
            runs["working"] = self.start(staged("working channel", working_channel(
                q.filter, self.working, vector, self.limit)))
        rewriting = self.start(staged("rewrite channels", rewrite_channels(
            self.deps, self.caller, q.text, q.filter, limit=self.limit, as_of=q.as_of,
        ))) if self.planned and settings.search_rewrite else None
        results = dict(zip(runs, await asyncio.gather(*runs.values())))
        always = results.pop(PREFERENCES, [])
        weights = routed_weights(self.parts.intent, settings.channel_weights)
        for name, scored in (await rewriting if rewriting is not None else {}).items():
            results[name], weights[name] = scored, weights.get("rewrite", 1.0)
        found = Found(results, weights, always)
        if sessions is not None:
            found.sessions = await sessions
            results[SESSION], weights[SESSION] = found.sessions.scored, session.weight
        await self.graph_channel(found)
        return found

    async def graph_channel(self, found: Found) -> None:
        graph = self.service.graph
        if self.planned and graph.enabled:
            with stage("graph channel"):
                found.graph = await graph.search(self.caller, self.q.filter, self.text, found.results, found.weights,
                                                 limit=self.limit, as_of=self.q.as_of)
            found.results[GRAPH], found.weights[GRAPH] = found.graph.scored, graph.weight

    def adjustments(self) -> Adjustments:
        q = self.q
        return Adjustments(
            intent=self.parts.intent, time_range=self.parts.time_range, now=self.now,
            recency_lambdas=self.settings.recency_lambdas, scope_weights=q.scope_weights,
            scope_order=q.scope_order or DEFAULT_SCOPE_ORDER, explain=q.explain,
        )

    def fused(self, found: Found) -> Awaitable[list[SearchHit]]:
        """Fusion and adjustments, CPU work over a few hundred candidates: in a thread, off the event
        loop. Duplicates are collapsed only as far as a hit can still be answered (top_k, rerank's
        pool, feedback's documents): past that no content needs normalising."""
        s = self.settings
        ranked = max(self.top_k, MAX_CANDIDATES if s.search_rerank else 0, s.search_feedback_docs)
        adjustments = self.adjustments()
        return asyncio.to_thread(
            lambda: collapse_duplicates(fuse_and_adjust(found.results, found.weights, adjustments), ranked))

    async def fusion(self, found: Found) -> tuple[list[SearchHit], asyncio.Future]:
        """The fused hits, and the reading of those likely answered that no channel read whole. The
        answer is nearly always among the channels' leading hits: the channels read those whole, and
        those they did not (the graph's, the sessions') are read while fusion runs. Fusion lifts into
        the answer hits no channel read whole (in 102 of 231 LoCoMo searches, most from just past a
        channel's first top_k): without the lexical channels' session, one opens for them, so that
        reading them after fusion is one statement, not four round trips."""
        found.read = {s.record.id: s.record for scored in (*found.results.values(), found.always)
                      for s in scored if s.whole}
        if self.planned and not self.settings.search_rerank:
            self.reads.open_rows_session()
        leading = [s.record.id for scored in (*(r[:self.top_k] for r in found.results.values()), found.always)
                   for s in scored if s.record.layer is not Layer.WORKING and s.record.id not in found.read]
        whole = self.start(self.read_whole(list(dict.fromkeys(leading))))
        with stage("fusion"):
            return await self.fused(found), whole

    async def feedback(self, found: Found, hits: list[SearchHit]) -> list[SearchHit]:
        if not (self.planned and feedback.wanted(self.settings)):
            return hits
        with stage("feedback"):
            second = await feedback.feedback_channels(self.deps.memories, self.deps.feedback, self.settings, self.caller,
                                                      self.q.filter, self.parts, hits, limit=self.limit, as_of=self.q.as_of)
            if not second:
                return hits
            found.results.update(second)
            return await self.fused(found)

    async def rerank(self, hits: list[SearchHit]) -> list[SearchHit]:
        if not self.settings.search_rerank:
            return hits
        with stage("rerank"):
            return await reranked(self.deps, self.q.text, hits, explain=self.q.explain)

    async def finish(self, found: Found, hits: list[SearchHit], whole: dict) -> list[SearchHit]:
        q = self.q
        with stage("finish"):
            hits = include_preferences(hits[:self.top_k], [s.record for s in found.always], self.top_k, explain=q.explain)
            hits = await self.whole(within_budget(hits, q.token_budget), whole)
            if q.explain:
                explain_links(hits, found.graph.why if found.graph else {})
                explain_sessions(hits, found.sessions.why if found.sessions else {})
                await self.explain_conflicts(hits)
                explain_tags(hits)
            if not hits:
                self.service.in_background("no-result signal not kept",
                                           keep_nothing_found(self.deps, self.caller, q.text, q.filter.user_id))
            self.service.usage.add(self.caller, [h.memory.stored_id for h in hits if h.memory.layer is not Layer.WORKING])
            return hits

    async def read_whole(self, ids: list, *, last: bool = False) -> dict:
        """ids read whole, in the rows' session when one is open (left open unless last)."""
        if not ids:
            return {}
        with stage("whole rows"):
            return {r.id: r for r in await self.reads.whole(ids, last=last)}

    async def whole(self, hits: list[SearchHit], whole: dict) -> list[SearchHit]:
        """The answered hits read whole (the channels read candidates: what ranking needs): those
        read while fusion ran, and the rest now. A hit forgotten since its channel read it is gone
        from the answer too."""
        missing = [h.memory.id for h in hits if h.memory.layer is not Layer.WORKING and h.memory.id not in whole]
        if missing:
            whole = {**whole, **await self.read_whole(missing, last=True)}
        return [h if h.memory.layer is Layer.WORKING else replace(h, memory=whole[h.memory.id])
                for h in hits if h.memory.layer is Layer.WORKING or h.memory.id in whole]

    async def explain_conflicts(self, hits: list[SearchHit]) -> None:
        """A served value that another is waiting to replace says so: the agent should not take it
        as settled."""
        stored = [h for h in hits if h.memory.layer is not Layer.WORKING]
        disputed = await self.deps.conflicts.challengers_of(self.caller, [h.memory.stored_id for h in stored])
        for hit in stored:
            for challenger in disputed.get(hit.memory.stored_id, []):
                hit.explanation.append(ScoreComponent(
                    "conflict", 0.0, 0, f"disputed by {challenger.id}, which says "
                    f"{(challenger.value or challenger.content)[:200]!r}: needs confirmation (ResolveConflict)"))

    async def close(self) -> None:
        """Ends what is still going (a failed or cancelled search), off the sessions before they end."""
        going = [task for task in self.started if not task.done()]
        for task in going:
            task.cancel()
        await asyncio.gather(*going, return_exceptions=True)
        await self.reads.close()
