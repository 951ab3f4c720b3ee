"""The tenant whose work is being done, for per-tenant telemetry (LLM tokens) in layers that are
not handed the caller: set where work starts (an authenticated RPC, a claimed job)."""
from __future__ import annotations

import contextvars

_tenant: contextvars.ContextVar[str] = contextvars.ContextVar("memplane_work_tenant", default="")


def set_work_tenant(tenant_id: str | None) -> contextvars.Token:
    return _tenant.set(tenant_id or "")


def reset_work_tenant(token: contextvars.Token) -> None:
    _tenant.reset(token)


def work_tenant() -> str:
    """The tenant id, or "" for work of no tenant (platform admin calls)."""
    return _tenant.get()
