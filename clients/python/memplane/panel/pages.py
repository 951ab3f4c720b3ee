"""Read-only pages: memories (filtered by scope, kind, status, session, entity), one memory,
entities, an entity's history timeline, search with explanations, conflicts and stale summaries,
a session's working memory. Each is one or a few SDK calls with the visitor's key."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from memplane import HistoryEntry, Kind, MemoryStatus, Scope, SearchHit
from memplane.enums import ProtoEnum

from .guard import client_of, signed_in
from .render import page

FILTER_TEXT = ("session_id", "entity", "user_id")
FILTER_ENUMS: dict[str, tuple[str, type[ProtoEnum]]] = {
    "scope": ("scopes", Scope), "kind": ("kinds", Kind), "status": ("statuses", MemoryStatus),
}
PAGE_SIZE = 50
# Finding entities reads the structured memories' first pages; a tenant with more lists the rest
# through the entity filter of the memories page.
ENTITY_SCAN_LIMIT = 1000
HISTORY_LIMIT = 500


class BadInput(ValueError):
    """A query parameter the panel cannot pass on (shown as 400 with its message)."""


def sdk_filters(params: Mapping[str, str]) -> dict[str, Any]:
    """The SDK filter keywords of the filter form's values; empty ones do not filter."""
    filters: dict[str, Any] = {k: params[k].strip() for k in FILTER_TEXT if params.get(k, "").strip()}
    for param, (keyword, enum) in FILTER_ENUMS.items():
        if params.get(param):
            try:
                filters[keyword] = enum.parse(params[param])
            except ValueError as exc:
                raise BadInput(str(exc)) from None
    return filters


def form_values(params: Mapping[str, str]) -> dict[str, str]:
    """The filter form's fields as given, to refill the form and to carry into the next page link."""
    return {k: params.get(k, "") for k in (*FILTER_TEXT, *FILTER_ENUMS)}


@signed_in
async def memories(request: Request) -> Response:
    params = request.query_params
    filters = sdk_filters(params)
    async with client_of(request) as client:
        listed = await client.list_memories(page_size=PAGE_SIZE, page_token=params.get("page_token", ""), **filters)
    return page(request, "memories.html", memories=listed.items, next_page_token=listed.next_page_token,
                values=form_values(params), done=params.get("done", ""))


@signed_in
async def memory(request: Request) -> Response:
    memory_id = request.path_params["memory_id"]
    async with client_of(request) as client:
        found = await client.get_memory(memory_id)
        history = await client.list_history(memory_id=memory_id, page_size=100)
    return page(request, "memory.html", memory=found, history=history.items, done=request.query_params.get("done", ""))


@signed_in
async def entities(request: Request) -> Response:
    """Entities of the visible facts and preferences whose name contains the query."""
    query = request.query_params.get("q", "").strip()
    found: dict[str, set[str]] = {}
    async with client_of(request) as client:
        seen = 0
        async for item in client.iter_memories(page_size=200, kinds=[Kind.FACT, Kind.PREFERENCE]):
            seen += 1
            if item.entity and query.casefold() in item.entity.casefold():
                found.setdefault(item.entity, set()).add(item.attribute)
            if seen >= ENTITY_SCAN_LIMIT:
                break
    return page(request, "entities.html", query=query,
                entities=sorted((e, sorted(a for a in attrs if a)) for e, attrs in found.items()))


@signed_in
async def history(request: Request) -> Response:
    """An entity's changes (optionally one attribute's) as a timeline, newest first."""
    entity = request.query_params.get("entity", "").strip()
    attribute = request.query_params.get("attribute", "").strip()
    if not entity:
        raise BadInput("name an entity")
    entries: list[HistoryEntry] = []
    async with client_of(request) as client:
        token = ""
        while len(entries) < HISTORY_LIMIT:
            got = await client.list_history(entity=entity, attribute=attribute or None, page_size=100, page_token=token)
            entries.extend(got.items)
            token = got.next_page_token
            if not token:
                break
    return page(request, "history.html", entity=entity, attribute=attribute, history=entries[:HISTORY_LIMIT],
                truncated=bool(token))


@signed_in
async def search(request: Request) -> Response:
    params = request.query_params
    query = params.get("q", "").strip()
    hits: tuple[SearchHit, ...] = ()
    if query:
        filters = sdk_filters(params)
        async with client_of(request) as client:
            hits = (await client.search(query, top_k=20, explain=True, include_pending=bool(params.get("pending")),
                                        **filters)).hits
    return page(request, "search.html", query=query, hits=hits, values=form_values(params),
                pending=bool(params.get("pending")))


@signed_in
async def review(request: Request) -> Response:
    """Open conflicts (to resolve), summaries gone stale since a source of theirs changed, and
    memories a lifecycle policy flagged for review (often used, little believed)."""
    async with client_of(request) as client:
        conflicts = await client.list_conflicts(page_size=100)
        stale = await client.list_memories(kinds=Kind.SUMMARY, statuses=MemoryStatus.STALE, page_size=100)
        flagged = await client.list_memories(flagged_for_review=True, include_pending=True, page_size=100)
    return page(request, "review.html", conflicts=conflicts.items, stale=stale.items, flagged=flagged.items,
                done=request.query_params.get("done", ""))


@signed_in
async def working(request: Request) -> Response:
    session_id = request.query_params.get("session_id", "").strip()
    state = None
    if session_id:
        async with client_of(request) as client:
            state = await client.get_working_memory(session_id)
    return page(request, "working.html", session_id=session_id, working=state,
                follow=bool(request.query_params.get("follow")))
