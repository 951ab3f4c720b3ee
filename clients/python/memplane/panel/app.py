"""The panel's Starlette application: routes, static files and error pages."""
from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from memplane import (
    InvalidArgumentError,
    MemplaneError,
    NotFoundError,
    PermissionDeniedError,
    UnauthenticatedError,
    UnavailableError,
)

from . import actions, auth, live, pages, usage
from .guard import COOKIE, SecurityHeaders, sessions
from .render import page
from .sessions import SessionStore

STATUS = {NotFoundError: 404, PermissionDeniedError: 403, InvalidArgumentError: 400, UnavailableError: 503}


async def refused(request: Request, exc: Exception) -> Response:
    """A call the server refused, shown with its code and reason (another tenant's memory and one
    that does not exist are both NOT_FOUND, so the page tells them apart no more than the API)."""
    if isinstance(exc, UnauthenticatedError):
        # The key was revoked since sign-in: the session is worthless.
        sessions(request).drop(request.cookies.get(COOKIE))
        return RedirectResponse("/login", status_code=303)
    assert isinstance(exc, MemplaneError)
    status = next((code for kind, code in STATUS.items() if isinstance(exc, kind)), 502)
    return page(request, "error.html", status_code=status, title=f"{exc.code.name} {exc.reason}".strip(),
                message=exc.message)


async def bad_input(request: Request, exc: Exception) -> Response:
    return page(request, "error.html", status_code=400, title="Bad request", message=str(exc))


async def home(request: Request) -> Response:
    return RedirectResponse("/memories", status_code=303)


def build_app(address: str, *, call_timeout: float = 30.0) -> Starlette:
    """The panel calling the Memplane server at address; call_timeout bounds each SDK call."""
    app = Starlette(
        routes=[
            Route("/", home),
            Route("/login", auth.login_form, methods=["GET"]),
            Route("/login", auth.login, methods=["POST"]),
            Route("/logout", auth.logout, methods=["POST"]),
            Route("/memories", pages.memories),
            Route("/memories/{memory_id}", pages.memory),
            Route("/memories/{memory_id}/forget", actions.forget, methods=["POST"]),
            Route("/memories/{memory_id}/correct", actions.correct, methods=["POST"]),
            Route("/conflicts/{memory_id}/resolve", actions.resolve, methods=["POST"]),
            Route("/entities", pages.entities),
            Route("/history", pages.history),
            Route("/search", pages.search),
            Route("/review", pages.review),
            Route("/working", pages.working),
            Route("/usage", usage.usage),
            Route("/usage.csv", usage.usage_csv),
            Route("/live", live.live_page),
            Route("/live/events", live.live_events),
            Mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static"),
        ],
        middleware=[Middleware(SecurityHeaders)],
        exception_handlers={MemplaneError: refused, pages.BadInput: bad_input},
    )
    app.state.address = address
    app.state.call_timeout = call_timeout
    app.state.sessions = SessionStore()
    return app
