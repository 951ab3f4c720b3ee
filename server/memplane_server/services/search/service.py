"""Search: the retrieval channels (services/search/channels.py) and the session's working memory
run concurrently, are fused by weighted reciprocal rank fusion routed by the query's intent,
adjusted (scope, kind intent, recency, confidence), optionally reranked by an LLM, and cut to
top_k and a token budget; each search is a run of named stages (services/search/run.py)."""
from __future__ import annotations

import asyncio
import logging
import math
import os

from ...core.access.caller import Caller
from ...core.errors import invalid
from ...core.model import SearchHit
from ...core.validation import MAX_FILTER_VALUES
from ...logs import OncePerCause, cause_of
from .deps import SearchDeps
from .graph import GraphChannel
from .query import SearchQuery
from .run import SearchRun
from .session import SessionChannel
from .stages import stage
from .usage import UsageCounts

log = logging.getLogger(__name__)


class SearchService:
    def __init__(self, deps: SearchDeps) -> None:
        self.deps = deps
        self._background: set[asyncio.Task] = set()
        self.usage = UsageCounts(deps.memories, deps.clock)
        self._failures = OncePerCause(log)
        self.graph = GraphChannel(deps.entities, weight=deps.settings.graph_weight,
                                  max_rows=deps.settings.graph_max_entity_rows)
        self.session = SessionChannel(deps.digests, deps.memories, weight=deps.settings.session_weight,
                                      top_sessions=deps.settings.session_top_sessions)
        self.cores = len(os.sched_getaffinity(0))

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
            return await SearchRun(self, caller, q, self._check(q)).answer()

    def in_background(self, failure: str, work) -> None:
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
