"""Builds the windows of neighbouring turns in the background, session by session.

A write only marks its sessions (one row upsert in its transaction), so windows cost the
write path nothing. The server's worker takes a session once it has been quiet for a moment
(MEMPLANE_CONTEXT_QUIET_SECONDS): a session being written in bursts is built once after the
burst, not once a batch, and bulk loads keep the CPU for their own embeddings. Its embeddings
yield the embedder to requests but for a bounded share (llm/embedders.py): under a load that
outruns it, its backlog grows (GetStats.sessions_awaiting_context) rather than the requests'
latency.
"""
from __future__ import annotations

import asyncio
import logging

from opentelemetry import metrics

from ..core.tokens import keyword_tokens
from ..core.windows import averaged, windows_to_build
from .deps import Deps

log = logging.getLogger(__name__)

LEASE_SECONDS = 300.0
# Summed over every process, the number of sessions built: with N servers and M workers each
# marked session is built once (the lease on its queue row), which this makes observable.
_sessions_built = metrics.get_meter("memplane.server").create_counter(
    "memplane.turn_windows.sessions_built", unit="{session}", description="sessions whose turn windows were built",
)


class ContextService:
    def __init__(self, deps: Deps, *, quiet_seconds: float = 0.0) -> None:
        self.deps = deps
        self.store = deps.contexts
        self.quiet_seconds = quiet_seconds

    async def refresh_next(self) -> bool:
        """Rebuilds the changed windows of one marked session; False when none is waiting."""
        leased = await self.store.lease_next(LEASE_SECONDS, self.quiet_seconds)
        if leased is None:
            return False
        tenant_id, session_id = leased.tenant_id, leased.session_id
        average = self.deps.settings.context_vectors == "average"
        turns = await self.store.session_turns(tenant_id, session_id, with_vectors=average)
        # The way vectors are made is part of the fingerprint: changing it rebuilds every window.
        how = f"{self.deps.embedder.model_id}+average" if average else self.deps.embedder.model_id
        built = windows_to_build(turns, self.deps.settings.context_window, how)
        keywords = await asyncio.to_thread(lambda: [" ".join(keyword_tokens(w.text)) for w in built])
        shared = [w for w in built if not w.alone and (not average or all(t.vector is not None for t in w.members))]
        if average:
            vectors = [averaged(w) for w in shared]
        else:
            vectors = await self.deps.embedder.embed_passages([w.text for w in shared], background=True)
        vector_of = {w.id: v for w, v in zip(shared, vectors)}
        await self.store.save(tenant_id, [(w, k, vector_of.get(w.id)) for w, k in zip(built, keywords)])
        await self.store.finish(tenant_id, session_id, leased.marked_at)
        _sessions_built.add(1)
        return True

