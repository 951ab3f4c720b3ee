"""The authenticated caller of the current RPC (set by the auth interceptor), how a stream resolves
it again, and its request key (set by the idempotency interceptor)."""
from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable

from ..core.access.caller import Caller
from ..core.access.requests import RequestKey

_current: contextvars.ContextVar[Caller] = contextvars.ContextVar("memplane_caller")
# A stream's way to resolve its key again (from a lookup at most that many seconds old): what the
# key may do now, not at open time.
_reauthorize: contextvars.ContextVar[Callable[[float], Awaitable[Caller]]] = contextvars.ContextVar("memplane_reauthorize")
# The call's request_id as the idempotency interceptor saw it; None without one.
_request: contextvars.ContextVar[RequestKey | None] = contextvars.ContextVar("memplane_request", default=None)


def set_caller(caller: Caller) -> contextvars.Token:
    return _current.set(caller)


def reset_caller(token: contextvars.Token) -> None:
    _current.reset(token)


def current_caller() -> Caller:
    return _current.get()


def set_reauthorize(resolve: Callable[[float], Awaitable[Caller]]) -> contextvars.Token:
    return _reauthorize.set(resolve)


def reset_reauthorize(token: contextvars.Token) -> None:
    _reauthorize.reset(token)


def current_reauthorize() -> Callable[[float], Awaitable[Caller]]:
    return _reauthorize.get()


def set_request_key(key: RequestKey) -> contextvars.Token:
    return _request.set(key)


def reset_request_key(token: contextvars.Token) -> None:
    _request.reset(token)


def current_request_key() -> RequestKey | None:
    return _request.get()
