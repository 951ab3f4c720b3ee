"""Templates (Jinja2, autoescaped: every memory field is shown as text, never as markup) and the
filters they display values with."""
from __future__ import annotations

from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from memplane import Kind, MemoryStatus, Scope

# autoescape=True for every template, whatever its name; undefined names fail instead of showing "".
TEMPLATES = Jinja2Templates(env=jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"), autoescape=True,
    undefined=jinja2.StrictUndefined,
))


def when(value: datetime | None) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if value else ""


def name(value: Enum | None) -> str:
    """An SDK enum member as the lower-case name the filters take."""
    return value.name.lower() if value is not None else ""


TEMPLATES.env.filters.update(when=when, name=name)
TEMPLATES.env.globals.update(
    SCOPES=[name(m) for m in Scope if m.value], KINDS=[name(m) for m in Kind if m.value],
    STATUSES=[name(m) for m in MemoryStatus if m.value],
)


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    """A page; signed-in pages get the session (for the key label and the CSRF token of forms)."""
    context.setdefault("session", getattr(request.state, "session", None))
    return TEMPLATES.TemplateResponse(request, template, context, status_code=status_code)
