"""What every request passes: the session lookup, CSRF and origin checks on state-changing
requests, and the security headers of every response."""
from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import wraps
from typing import cast
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memplane import AsyncAdminClient, AsyncMemoryClient

from .sessions import Session, SessionStore

COOKIE = "memplane_panel"
CSRF_FIELD = "csrf"

Handler = Callable[[Request], Awaitable[Response]]


def sessions(request: Request) -> SessionStore:
    return cast(SessionStore, request.app.state.sessions)


def session_of(request: Request) -> Session:
    """The signed-in session of a request that passed signed_in."""
    return cast(Session, request.state.session)


@asynccontextmanager
async def client_of(request: Request) -> AsyncIterator[AsyncMemoryClient]:
    """An SDK client with this request's own session key, closed when the request is done: a
    client is never shared between requests, so never between visitors."""
    session = session_of(request)
    async with AsyncMemoryClient(
        request.app.state.address, session.api_key, agent_id=session.agent_id or None,
        default_timeout=request.app.state.call_timeout,
    ) as client:
        yield client


@asynccontextmanager
async def admin_client_of(request: Request) -> AsyncIterator[AsyncAdminClient]:
    """The admin client of this request's own session key (its role decides what it may read)."""
    session = session_of(request)
    async with AsyncAdminClient(request.app.state.address, session.api_key,
                                default_timeout=request.app.state.call_timeout) as client:
        yield client


def same_origin(request: Request) -> bool:
    """Whether a state-changing request comes from a page of this panel. Browsers send Origin with
    every POST; a request without one is not a browser's cross-site request (curl, scripts), and
    "null" (sandboxed frames, some redirects) is refused."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    return origin in (f"http://{host}", f"https://{host}")


def signed_in(handler: Handler) -> Handler:
    """Runs handler only for a live session (else: to the sign-in page); a POST must also come
    from this origin and carry the session's CSRF token."""

    @wraps(handler)
    async def guarded(request: Request) -> Response:
        session = sessions(request).get(request.cookies.get(COOKIE))
        if session is None:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse("/login?" + urlencode({"next": target}), status_code=303)
        if request.method == "POST":
            form = await request.form()
            token = form.get(CSRF_FIELD)
            if not same_origin(request) or not isinstance(token, str) or not hmac.compare_digest(
                token.encode(), session.csrf_token.encode()
            ):
                return PlainTextResponse("Forbidden: cross-site request or stale form; reload the page.", 403)
        request.state.session = session
        return await handler(request)

    return guarded


# Memory content is shown escaped everywhere; the policy is the second wall: even markup that got
# through could run no inline script, load nothing from elsewhere and send no form elsewhere.
SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
     b"base-uri 'none'; frame-ancestors 'none'; form-action 'self'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    # Not no-referrer: with it browsers send `Origin: null` on same-origin POSTs, which same_origin refuses.
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


class SecurityHeaders:
    """ASGI middleware adding SECURITY_HEADERS to every HTTP response (streams included)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)
