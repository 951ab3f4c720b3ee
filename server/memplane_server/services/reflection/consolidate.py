"""Consolidation: clusters of similar lessons and procedures in the caller's reach (core/reflection/consolidation.py)
abstracted by the model into one more general memory each, linked to its sources, which stay and
rank below it. Without a model only the clusters are reported (dry run)."""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

import numpy as np

from ...core.access.caller import Caller
from ...core.access.requests import request_key
from ...core.errors import Code, MemplaneError
from ...core.model import Kind, MemoryDraft, MemoryFilter, MemoryRecord, Scope
from ...core.reflection.consolidation import clusters
from ...core.retrieval.tokens import keyword_tokens
from ...core.validation import check_filter
from ...llm.chat import went_without
from ...llm.consolidation import consolidate as consolidate_with_model
from ..write.service import WriteService
from .deps import ReflectionDeps

KINDS = (Kind.LESSON, Kind.PROCEDURE)
log = logging.getLogger(__name__)


@dataclass
class Cluster:
    kind: Kind
    members: list[MemoryRecord]
    consolidated: MemoryRecord | None = None


@dataclass
class Consolidation:
    clusters: list[Cluster]
    considered: int  # lessons and procedures compared: the newest MEMPLANE_GROUPING_MAX_ROWS
    left_out: int  # older candidates beyond that, left for a later or narrower call
    # Why clusters were left without their consolidated memory: the model answered malformed or
    # the tenant's token budget is spent (llm/chat.py DEGRADING_REASONS); "" when none was.
    degraded: str = ""


def _clusters(rows: list[tuple[MemoryRecord, np.ndarray]]) -> list[list[int]]:
    records = [m for m, _ in rows]
    words = [set(keyword_tokens(f"{m.content} {m.context}")) for m in records]
    return clusters(records, np.stack([v for _, v in rows]), words)


class ConsolidateService:
    def __init__(self, deps: ReflectionDeps, writes: WriteService) -> None:
        self.deps = deps
        self.writes = writes

    async def consolidate(
        self, caller: Caller, *, scope: Scope | None, domain: str | None, dry_run: bool
    ) -> Consolidation:
        caller.require_writer()
        if not dry_run and self.deps.llm is None:
            raise MemplaneError(Code.FAILED_PRECONDITION, "LLM_NOT_CONFIGURED",
                                "consolidating needs MEMPLANE_LLM_MODEL; a dry run reports the clusters")
        # The domain is the caller's text: checked like a filter's, so PostgreSQL never sees a NUL.
        f = check_filter(
            MemoryFilter(kinds=KINDS, scopes=(scope,) if scope else (), domains=(domain,) if domain else ()))
        rows, matched = await self.deps.memories.embeddings_of(
            caller, f, limit=self.deps.settings.grouping_max_rows, to_consolidate=True)
        result = Consolidation([], considered=len(rows), left_out=matched - len(rows))
        if result.left_out:
            log.warning("consolidation of tenant %s compares its newest %d lessons and procedures; %d older ones"
                        " wait (MEMPLANE_GROUPING_MAX_ROWS)", caller.tenant_id, len(rows), result.left_out)
        if len(rows) < 2:
            return result
        records = [m for m, _ in rows]
        result.clusters = [Cluster(records[g[0]].kind, [records[i] for i in g])
                           for g in await self.deps.cpu.run(lambda: _clusters(rows))]
        if not dry_run:
            for cluster in result.clusters:
                try:
                    await self._abstract(caller, cluster)
                except MemplaneError as exc:
                    if not (reason := went_without("consolidation", exc)):
                        raise
                    # A malformed answer leaves that cluster as it is; a spent budget every one left.
                    result.degraded = reason
                    log.warning("consolidation of tenant %s left a cluster unconsolidated: %s", caller.tenant_id,
                                exc.message)
                    if reason == "LLM_BUDGET_EXHAUSTED":
                        break
        return result

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
            derived_from=tuple(m.stored_id for m in cluster.members),
        )
        # Keyed by the cluster: consolidating the same memories again answers with the first result.
        [written] = await self.writes.write(
            caller, [draft], request_key(caller, "Consolidate", key, b""), derived=True)
        await self.deps.memories.mark_consolidated(caller, [m.stored_id for m in cluster.members], written.stored_id)
        cluster.consolidated = written
