"""Consolidation: clusters of similar lessons and procedures in the caller's reach (core/consolidation.py)
abstracted by the model into one more general memory each, linked to its sources, which stay and
rank below it. Without a model only the clusters are reported (dry run)."""
from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass

import numpy as np

from ..core.caller import Caller
from ..core.consolidation import clusters
from ..core.errors import Code, MemplaneError
from ..core.model import Kind, MemoryDraft, MemoryFilter, MemoryRecord, Scope
from ..core.requests import request_key
from ..core.tokens import keyword_tokens
from ..core.validation import check_filter
from ..llm.consolidation import consolidate as consolidate_with_model
from .deps import Deps
from .write import WriteService

KINDS = (Kind.LESSON, Kind.PROCEDURE)


@dataclass
class Cluster:
    kind: Kind
    members: list[MemoryRecord]
    consolidated: MemoryRecord | None = None


class ConsolidateService:
    def __init__(self, deps: Deps, writes: WriteService) -> None:
        self.deps = deps
        self.writes = writes

    async def consolidate(
        self, caller: Caller, *, scope: Scope | None, domain: str | None, dry_run: bool
    ) -> list[Cluster]:
        caller.require_writer()
        if not dry_run and self.deps.llm is None:
            raise MemplaneError(Code.FAILED_PRECONDITION, "LLM_NOT_CONFIGURED",
                                "consolidating needs MEMPLANE_LLM_MODEL; a dry run reports the clusters")
        # The domain is the caller's text: checked like a filter's, so PostgreSQL never sees a NUL.
        f = check_filter(
            MemoryFilter(kinds=KINDS, scopes=(scope,) if scope else (), domains=(domain,) if domain else ()))
        rows = [(m, v) for m, v in await self.deps.memories.embeddings_of(caller, f)
                if caller.can_write(m) and m.consolidated_into is None and m.source_type != "consolidation"]
        if len(rows) < 2:
            return []
        records = [m for m, _ in rows]
        words = await asyncio.to_thread(lambda: [set(keyword_tokens(f"{m.content} {m.context}")) for m in records])
        found = [Cluster(records[g[0]].kind, [records[i] for i in g])
                 for g in clusters(records, np.stack([v for _, v in rows]), words)]
        if not dry_run:
            for cluster in found:
                await self._abstract(caller, cluster)
        return found

    async def _abstract(self, caller: Caller, cluster: Cluster) -> None:
        assert self.deps.llm is not None
        ids = sorted(str(m.id) for m in cluster.members)
        key = hashlib.sha256(",".join(ids).encode()).hexdigest()[:32]
        content, context, confidence = await consolidate_with_model(
            self.deps.llm, cluster.kind.value, [m.content for m in cluster.members])
        first = cluster.members[0]
        draft = MemoryDraft(
            scope=first.scope, domain=first.domain, agent_id=None, layer=None, kind=cluster.kind, content=content,
            context=context, confidence=confidence, source_type="consolidation", source_id=key,
            derived_from=tuple(m.id for m in cluster.members),
        )
        # Keyed by the cluster: consolidating the same memories again answers with the first result.
        [written] = await self.writes.write(caller, [draft], request_key(caller, "Consolidate", key, b""))
        await self.deps.memories.mark_consolidated(caller, [m.id for m in cluster.members], written.id)
        cluster.consolidated = written
