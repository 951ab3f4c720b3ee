"""New memories as they happen: the live page, and the server-sent event stream behind it, fed by
the SDK's watch() with the visitor's key (so it carries exactly the changes that key may see)."""
from __future__ import annotations

import json
from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response

from memplane import ChangeEvent, MemplaneError

from .guard import client_of, session_of, sessions, signed_in
from .pages import form_values, sdk_filters
from .render import name, page, when


@signed_in
async def live_page(request: Request) -> Response:
    sdk_filters(request.query_params)  # refuses a bad filter now rather than in the stream
    return page(request, "live.html", values=form_values(request.query_params),
                stream_query=request.url.query)


def as_json(event: ChangeEvent) -> str:
    memory = event.memory
    return json.dumps({
        "position": event.position, "change": name(event.change_kind), "memory_id": event.memory_id,
        "kind": name(event.kind), "scope": name(event.scope), "session_id": event.session_id,
        "entity": event.entity, "time": when(event.change_time),
        "content": memory.content if memory else "", "status": name(memory.status) if memory else "",
    }, ensure_ascii=False)


@signed_in
async def live_events(request: Request) -> Response:
    filters = sdk_filters(request.query_params)
    # A browser's EventSource reconnects by itself, sending the id of the last event it got: the
    # watch resumes after it, so nothing is missed or shown twice.
    last = request.headers.get("last-event-id", "")
    after_position = int(last) if last.isdigit() else None
    session_id = session_of(request).id
    store = sessions(request)

    async def events() -> AsyncIterator[dict[str, str]]:
        try:
            async with client_of(request) as client:
                # progress=True: the server also reports now and then while nothing visible changes,
                # which is when a stream whose visitor signed out notices and ends.
                async for item in client.watch(after_position=after_position, scopes=filters.get("scopes"),
                                               kinds=filters.get("kinds"), session_id=filters.get("session_id"),
                                               entity=filters.get("entity"), progress=True, timeout=None):
                    if not store.alive(session_id):
                        return
                    if isinstance(item, ChangeEvent):
                        yield {"event": "change", "id": str(item.position), "data": as_json(item)}
        except MemplaneError as exc:
            yield {"event": "failed", "data": json.dumps({"error": str(exc)}, ensure_ascii=False)}

    return EventSourceResponse(events(), ping=15)
