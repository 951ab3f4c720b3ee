"""The authenticated caller of the current RPC, set by the auth interceptor."""
from __future__ import annotations

import contextvars

from ..core.caller import Caller

_current: contextvars.ContextVar[Caller] = contextvars.ContextVar("memplane_caller")


def set_caller(caller: Caller) -> contextvars.Token:
    return _current.set(caller)


def reset_caller(token: contextvars.Token) -> None:
    _current.reset(token)


def current_caller() -> Caller:
    return _current.get()
