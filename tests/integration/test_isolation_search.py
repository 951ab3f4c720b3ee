"""Isolation property (tests/support/isolation_machine.py) over Search and every channel it reads
(issue 15: "the isolation property test covers the new channels and the entity index"):

    vector and keyword, their turn windows (vector_context, keyword_context: the shared rules
    build them), exact facts, time, the last turn of a dialogue, preferences, the session's
    working memory, both pseudo-relevance feedback channels (off by default, on here), and in a
    second, smaller run the graph channel (MEMPLANE_GRAPH_WEIGHT > 0) over the entity index,

besides the shared rules (writes, updates, forgets by id, turn windows, no-result signals).
Every hit is one the caller may read (a working item its own session's), within the filter, and when the score is
explained, every memory id its explanation names is one the caller may read and every count of
the graph channel (rows holding an entity, of rows in all) counts exactly the readable rows (a
count over rows it cannot read would tell it they exist: migration 0026).

To see it fail, drop the agent condition from the private branch of `mp_entity_links`
(migration 0017): the rows it links are joined back under visibility, but its counts are not.
"""
from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import replace

from hypothesis import strategies as st

from memplane_server.core.caller import Caller
from memplane_server.core.model import Layer, MemoryFilter, SearchHit
from memplane_server.services.search import SearchQuery, SearchService
from tests.support import isolation_inputs as inputs
from tests.support.isolation_machine import SEEN, action, machine, run_machine
from tests.support.isolation_oracle import Violation
from tests.support.isolation_world import QUERIES

# Pseudo-relevance feedback is off by default; on here, so its second pass is covered too.
FEEDBACK_ON = {"search_feedback_docs": 3, "search_feedback_vector": 1.0, "search_feedback_terms": 10}
GRAPH_ON = {**FEEDBACK_ON, "graph_weight": 1.0}  # off by default
SEARCHES = (
    *QUERIES,
    "what did Bob Stone do in Berlin",  # entities: graph channel
    "what is acme",  # a fact's entity: exact channel
    "did bob change",  # history intent: superseded values too
    "what did we note today about Lisbon",  # a time range: time channel
    "user: where is Bob Stone now?\nassistant: in Berlin\nuser: and Acme Corp?",  # a dialogue: last turn
)
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
ENTITY_COUNT = re.compile(r"'([^']+)' \((\d+) of (\d+) rows\)")


class SearchRules:
    SETTINGS = FEEDBACK_ON

    @action(weight=4, caller=inputs.callers, query=st.sampled_from(SEARCHES), memory_filter=inputs.search_filters,
            top_k=st.sampled_from([0, 5, 50]), explain=st.booleans())
    async def search(self, caller: Caller, query: str, memory_filter: MemoryFilter, top_k: int, explain: bool) -> None:
        service = SearchService(replace(self.deps, settings=self.deps.settings.model_copy(update=self.SETTINGS)))
        hits, err = await self.attempt(
            service.search(caller, SearchQuery(query, filter=memory_filter, top_k=top_k, explain=explain)))
        # Usage counters are updated in the background; let them land before the next snapshot.
        await asyncio.gather(*getattr(service, "_background", ()), return_exceptions=True)
        self.check_ok("Search", caller, err)
        working = [h.memory for h in hits if h.memory.layer is Layer.WORKING]
        for r in working:
            self.check_working_item("Search", caller, memory_filter.session_id, str(r.id), r.tenant_id, r.agent_id,
                                    r.session_id)
        self.check_selected("Search", caller, [h.memory for h in hits if h.memory.layer is not Layer.WORKING],
                            memory_filter)
        if explain:
            await self.check_explained(caller, hits)

    async def check_explained(self, caller: Caller, hits: list[SearchHit]) -> None:
        """No memory id the caller cannot read, and no count of rows it cannot read, in any explanation."""
        counted: list[tuple[str, int, int]] = []
        for hit in hits:
            for component in hit.explanation:
                SEEN["explained: " + component.name] += 1
                for ident in UUID.findall(component.detail):
                    if ident in self.oracle.work:
                        w = self.oracle.work[ident]
                        self.check_working_item("Search(explain)", caller, w.session, ident, w.tenant, w.agent,
                                                w.session)
                    else:
                        self.check_visible("Search(explain)", caller, uuid.UUID(ident))
                if component.name == "graph":
                    counted += [(entity, int(n), int(total))
                                for entity, n, total in ENTITY_COUNT.findall(component.detail)]
        if not counted:
            return
        rows = await self.deps.memories.pool.fetch(
            "SELECT id, entities FROM memories WHERE tenant_id = ANY($1::text[]) AND status IN ('active', 'pending')",
            self.world.tenants)
        readable = [set(r["entities"] or ()) for r in rows
                    if self.oracle.readable(caller, self.oracle.mems.get(r["id"]))]
        for entity, n, total in counted:
            SEEN["graph entity counts checked"] += 1
            holding = sum(entity in entities for entities in readable)
            if (n, total) != (holding, len(readable)):
                raise Violation(f"Search(explain): the graph channel counts {n} of {total} rows holding {entity!r}"
                                f" for {self.names.who(caller)}, who reads {holding} of {len(readable)}")


class GraphSearchRules(SearchRules):
    SETTINGS = GRAPH_ON


SearchMachine = machine("SearchMachine", SearchRules)
GraphSearchMachine = machine("GraphSearchMachine", GraphSearchRules)


def test_no_search_channel_crosses_tenant_agent_or_domain(deps, session_loop):
    run_machine(SearchMachine, deps, session_loop, examples=5, steps=50, min_calls=250)


def test_the_graph_channel_and_entity_index_cross_no_tenant_agent_or_domain(deps, session_loop):
    run_machine(GraphSearchMachine, deps, session_loop, examples=3, steps=50, min_calls=140)
