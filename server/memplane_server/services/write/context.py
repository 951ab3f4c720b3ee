"""Builds the windows of neighbouring turns in the background, session by session.

A write only marks its sessions (one row upsert in its transaction), so windows cost the
write path nothing. The server's worker takes a session once it has been quiet for a moment
(MEMPLANE_CONTEXT_QUIET_SECONDS), or BUILD_WITHIN_SECONDS after its first unbuilt write if it is
written without pause: a session being written in bursts is built once after the burst.

Building costs no embedding: a window's vector is first the mean of its turns' own vectors, so
windows keep up with any write rate (embedding each window's text, about 5 turns at
width 2, cost 4.5x the turns' own embedding and windows fell minutes behind a bulk load). With
MEMPLANE_CONTEXT_VECTORS=embed the session is then queued for an upgrade: each averaged window is
embedded from its text, a round at a time, in the embedder's background process when no request
has run for a moment (llm/embedders.py). Under a
load that keeps the embedder busy the upgrades wait (GetStats.sessions_awaiting_upgrade) and search
uses the averaged windows meanwhile.

The session's digests (services/write/digests.py) are rebuilt in the same round, from the same turns.
"""
from __future__ import annotations

import asyncio
import logging

from opentelemetry import metrics

from ...core.retrieval.tokens import keyword_tokens
from ...core.write.windows import averaged, windows_to_build, windows_to_upgrade
from .deps import WriteDeps
from .digests import DigestService

log = logging.getLogger(__name__)

LEASE_SECONDS = 300.0
BUILD_WITHIN_SECONDS = 10.0
# Windows upgraded per lease: a long session is upgraded over several rounds, none holding it for long.
UPGRADES_PER_ROUND = 16
AVERAGED = "+average"
# Summed over every process, the number of sessions built: with N servers and M workers each
# marked session is built once (the lease on its queue row), which this makes observable.
_sessions_built = metrics.get_meter("memplane.server").create_counter(
    "memplane.turn_windows.sessions_built", unit="{session}", description="sessions whose turn windows were built",
)


class ContextService:
    def __init__(self, deps: WriteDeps, *, quiet_seconds: float = 0.0, digests: DigestService | None = None) -> None:
        self.deps = deps
        self.store = deps.contexts
        self.quiet_seconds = quiet_seconds
        self.digests = digests

    @property
    def _upgrades(self) -> bool:
        return self.deps.settings.context_vectors == "embed"

    async def refresh_next(self) -> bool:
        """Rebuilds the changed windows of one marked session, averaged; False when none is waiting."""
        leased = await self.store.lease_next(LEASE_SECONDS, self.quiet_seconds, BUILD_WITHIN_SECONDS)
        if leased is None:
            return False
        tenant_id, session_id = leased.tenant_id, leased.session_id
        model = self.deps.embedder.model_id
        turns = await self.store.session_turns(tenant_id, session_id, with_vectors=True)
        # The way vectors are made is part of the fingerprint: an upgraded window is current as well.
        built = windows_to_build(turns, self.deps.settings.context_window, model + AVERAGED,
                                 also_current=model if self._upgrades else None)
        keywords = await asyncio.to_thread(lambda: [" ".join(keyword_tokens(w.text)) for w in built])
        vector_of = {w.id: averaged(w) for w in built
                     if not w.alone and all(t.vector is not None for t in w.members)}
        await self.store.save(tenant_id, [(w, k, vector_of.get(w.id)) for w, k in zip(built, keywords)])
        if self.digests is not None and self.digests.enabled:
            # Under the same lease and before finish(): a session marked again since is not saved.
            await self.digests.rebuild(tenant_id, session_id, leased.marked_at, turns)
        await self.store.finish(tenant_id, session_id, leased.marked_at,
                                upgrade=self._upgrades and any(not w.alone for w in built))
        _sessions_built.add(1)
        return True

    async def upgrade_next(self, stopping=lambda: False) -> bool:
        """Embeds up to UPGRADES_PER_ROUND averaged windows of one queued session, in one background
        call; False when none is queued. Embeds none once `stopping()`."""
        leased = await self.store.lease_upgrade(LEASE_SECONDS)
        if leased is None:
            return False
        tenant_id, session_id = leased.tenant_id, leased.session_id
        model = self.deps.embedder.model_id
        turns = await self.store.session_turns(tenant_id, session_id, with_vectors=False)
        todo = windows_to_upgrade(turns, self.deps.settings.context_window, model, model + AVERAGED)
        done = 0
        if not stopping():
            round_ = todo[:UPGRADES_PER_ROUND]
            texts = [w.text for w in round_ if not w.alone]
            vectors = iter(await self.deps.embedder.embed_passages(texts, background=True) if texts else [])
            for window in round_:
                await self.store.upgrade(tenant_id, window, None if window.alone else next(vectors))
                done += 1
        await self.store.finish_upgrade(tenant_id, session_id, leased.marked_at, done=done == len(todo))
        return True
