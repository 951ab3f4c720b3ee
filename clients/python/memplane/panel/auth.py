"""Signing in with an API key (checked by one call to the server with it) and signing out."""
from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from memplane import AsyncMemoryClient, MemplaneError, UnauthenticatedError

from .guard import COOKIE, same_origin, session_of, sessions, signed_in
from .render import page
from .sessions import IDLE_SECONDS


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path of this panel only, never another site."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/memories"


async def login_form(request: Request) -> Response:
    return page(request, "login.html", next=safe_next(request.query_params.get("next")), error="", agent_id="")


async def login(request: Request) -> Response:
    form = await request.form()
    key = str(form.get("api_key", "")).strip()
    agent_id = str(form.get("agent_id", "")).strip()
    target = safe_next(str(form.get("next", "")))

    def again(error: str, status: int) -> Response:
        return page(request, "login.html", status_code=status, next=target, error=error, agent_id=agent_id)

    # No session (so no CSRF token) exists yet; the origin check keeps another site from signing a
    # visitor in with the other site's key.
    if not same_origin(request):
        return again("Sign in from this panel's own page.", 403)
    if not key:
        return again("Enter an API key.", 400)
    try:
        async with AsyncMemoryClient(request.app.state.address, key, agent_id=agent_id or None,
                                     default_timeout=request.app.state.call_timeout) as client:
            await client.get_stats()
    except UnauthenticatedError:
        return again("This API key was not accepted.", 401)
    except MemplaneError as exc:
        return again(f"The server refused: {exc}", 403)
    store = sessions(request)
    store.drop(request.cookies.get(COOKIE))  # a new id at every sign-in: no session fixation
    session = store.create(key, agent_id)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE, session.id, max_age=IDLE_SECONDS, path="/", httponly=True, samesite="strict",
        secure=needs_secure_cookie(request),
    )
    return response


_LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")


def needs_secure_cookie(request: Request) -> bool:
    """The session cookie is Secure unless the panel is reached over plain HTTP on this machine
    (development). Behind a TLS-terminating proxy the panel itself sees HTTP under the public host
    name: the browser is on HTTPS there, and a cookie without Secure could leak over a plain link."""
    return request.url.scheme == "https" or (request.url.hostname or "") not in _LOOPBACK


@signed_in
async def logout(request: Request) -> Response:
    sessions(request).drop(session_of(request).id)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
