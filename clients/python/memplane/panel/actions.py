"""Changes from the UI: forget, correct (update) and resolve a conflict. Each is a POST (with the
session's CSRF token, checked by signed_in) that first answers with a confirmation page showing
exactly what will change; only the confirmation's own POST, carrying `confirmed=yes`, makes it."""
from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .guard import client_of, signed_in
from .pages import BadInput
from .render import page

KEEP = ("current", "challenger")


def confirmed(form: FormData) -> bool:
    return form.get("confirmed") == "yes"


def text(form: FormData, field: str) -> str:
    value = form.get(field, "")
    return value if isinstance(value, str) else ""


def memory_url(memory_id: str, done: str) -> str:
    return f"/memories/{quote(memory_id, safe='')}?done={done}"


@signed_in
async def forget(request: Request) -> Response:
    memory_id = request.path_params["memory_id"]
    form = await request.form()
    hard = text(form, "hard") == "yes"
    reason = text(form, "reason").strip()
    async with client_of(request) as client:
        if not confirmed(form):
            target = await client.get_memory(memory_id)
            return page(request, "confirm_forget.html", memory=target, hard=hard, reason=reason)
        await client.forget(ids=memory_id, hard=hard, reason=reason)
    return RedirectResponse("/memories?done=forgotten", status_code=303)


def changes_of(form: FormData, memory: Any) -> dict[str, Any]:
    """The fields the correction form changes: those whose new value differs from the memory's."""
    changes: dict[str, Any] = {}
    for field in ("content", "value"):
        # Browsers send textarea line breaks as CRLF; the stored text keeps the memory's own.
        new = text(form, field).replace("\r\n", "\n")
        if field in form and new != getattr(memory, field):
            changes[field] = new
    raw = text(form, "confidence").strip()
    if raw:
        try:
            confidence = float(raw)
        except ValueError:
            raise BadInput(f"confidence {raw!r} is not a number") from None
        if not math.isfinite(confidence) or not 0 <= confidence <= 1:
            raise BadInput("confidence is between 0 and 1")
        if abs(confidence - memory.confidence) > 1e-9:
            changes["confidence"] = confidence
    return changes


@signed_in
async def correct(request: Request) -> Response:
    memory_id = request.path_params["memory_id"]
    form = await request.form()
    async with client_of(request) as client:
        current = await client.get_memory(memory_id)
        changes = changes_of(form, current)
        if not changes:
            return RedirectResponse(memory_url(memory_id, "unchanged"), status_code=303)
        if not confirmed(form):
            return page(request, "confirm_correct.html", memory=current, changes=changes)
        await client.update_memory(memory_id, **changes)
    return RedirectResponse(memory_url(memory_id, "corrected"), status_code=303)


@signed_in
async def resolve(request: Request) -> Response:
    challenger_id = request.path_params["memory_id"]
    form = await request.form()
    keep = text(form, "keep")
    if keep not in KEEP:
        raise BadInput("keep is current or challenger")
    reason = text(form, "reason").strip()
    async with client_of(request) as client:
        if not confirmed(form):
            challenger = await client.get_memory(challenger_id)
            current = await client.get_memory(challenger.conflicts_with) if challenger.conflicts_with else None
            return page(request, "confirm_resolve.html", challenger=challenger, current=current, keep=keep,
                        reason=reason)
        await client.resolve_conflict(challenger_id, keep=keep, reason=reason)
    return RedirectResponse("/review?done=resolved", status_code=303)
