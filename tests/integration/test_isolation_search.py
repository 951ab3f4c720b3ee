"""Isolation property (tests/support/isolation_machine.py) over Search and every channel it reads
(every search channel and the entity index):

    vector and keyword, their turn windows (vector_context, keyword_context: the shared rules
    build them), exact facts, time, the last turn of a dialogue, preferences, the session's
    working memory, both pseudo-relevance feedback channels (off by default, on here), and in a
    second, smaller run the graph channel (MEMPLANE_GRAPH_WEIGHT > 0) over the entity index,
    and in a third the session channel over the session digests (MEMPLANE_SESSION_WEIGHT > 0:
    no digest may hold a keyword token that no active turn of its session and visibility says),

besides the shared rules (writes, updates, forgets by id, turn windows, no-result signals).
Every hit is one the caller may read (a working item its own session's), within the filter, and when the score is
explained, every memory id its explanation names is one the caller may read and every count of
the graph channel (rows holding an entity, of rows in all) counts exactly the readable rows (a
count over rows it cannot read would tell it they exist: migration 0026).

To see it fail, drop the agent condition from the private branch of `mp_entity_links`
(migration 0017): the rows it links are joined back under visibility, but its counts are not.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import replace

from hypothesis import strategies as st

from memplane_server.core.access.caller import Caller
from memplane_server.core.model import Layer, MemoryFilter, SearchHit
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.write.context import ContextService
from memplane_server.services.write.digests import DigestService
from tests.support import isolation_inputs as inputs
from tests.support.isolation_machine import SEEN, IsolationMachine, action, machine, run_machine
from tests.support.isolation_oracle import Violation
from tests.support.isolation_world import QUERIES, SESSIONS

# Pseudo-relevance feedback is off by default; on here, so its second pass is covered too.
FEEDBACK_ON = {"search_feedback_docs": 3, "search_feedback_vector": 1.0, "search_feedback_terms": 10}
GRAPH_ON = {**FEEDBACK_ON, "graph_weight": 1.0}  # off by default
SESSIONS_ON = {"session_digests": True, "session_weight": 1.0}  # off by default
# Seeds made turns of a session, outside the working layer: the digests' material.
TURN_SEEDS = st.lists(inputs.seeds.map(lambda seed: (seed[0], seed[1], {
    **seed[2], "kind": "turn", "session": seed[2]["session"] or SESSIONS[0],
    "scope": None if seed[2]["scope"] == "working" else seed[2]["scope"]})), min_size=2, max_size=4)
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
        # Usage counters are written a moment later; let them land before the next snapshot.
        await service.usage.flush()
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


class SessionSearchRules(SearchRules):
    SETTINGS = SESSIONS_ON

    @action(weight=2, seeds=TURN_SEEDS)
    async def converse(self, seeds: list) -> None:
        await self.remember(seeds, twice=False)

    @action()
    async def build_windows(self) -> None:
        """The background builder runs with session digests on; besides the windows' check, no
        digest may then hold a keyword token that no active turn of its session and visibility says."""
        on = replace(self.deps, settings=self.deps.settings.model_copy(update=self.SETTINGS))
        windows = ContextService(on, digests=DigestService(on))
        for _ in range(100):
            if not await windows.refresh_next():
                break
        await IsolationMachine.build_windows(self)  # nothing left to build: its check alone
        # This world's tenants only: the database is shared with the other tests, whose digests may
        # wait for a rebuild no worker runs there.
        leaks = await self.deps.memories.pool.fetch(
            "SELECT d.session_id, tok FROM session_digests d, unnest(tsvector_to_array(d.keywords)) AS tok"
            " WHERE d.tenant_id = ANY($1::text[]) AND NOT EXISTS (SELECT 1 FROM memories n"
            "  WHERE n.tenant_id = d.tenant_id AND n.session_id = d.session_id AND n.scope = d.scope"
            "  AND coalesce(n.domain, '') = d.domain AND coalesce(n.agent_id, '') = d.agent_id"
            "  AND n.status = 'active' AND n.kind = 'turn' AND tok = ANY(tsvector_to_array(n.keywords)))",
            self.world.tenants)
        SEEN["session digests checked"] += await self.deps.memories.pool.fetchval(
            "SELECT count(*) FROM session_digests WHERE tenant_id = ANY($1::text[])", self.world.tenants)
        if leaks:
            raise Violation(f"session digests hold words from outside their session and visibility: {leaks[:5]}")


SearchMachine = machine("SearchMachine", SearchRules)
GraphSearchMachine = machine("GraphSearchMachine", GraphSearchRules)
SessionSearchMachine = machine("SessionSearchMachine", SessionSearchRules)


def test_no_search_channel_crosses_tenant_agent_or_domain(deps, session_loop):
    run_machine(SearchMachine, deps, session_loop, examples=5, steps=50, min_calls=250)


def test_the_graph_channel_and_entity_index_cross_no_tenant_agent_or_domain(deps, session_loop):
    run_machine(GraphSearchMachine, deps, session_loop, examples=3, steps=50, min_calls=140)


def test_the_session_channel_and_digests_cross_no_tenant_agent_or_domain(deps, session_loop):
    run_machine(SessionSearchMachine, deps, session_loop, examples=3, steps=50, min_calls=140)
