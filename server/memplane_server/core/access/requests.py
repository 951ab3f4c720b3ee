"""A caller's request id: what makes a repeated mutation the same request, and only for the same
caller (tenant, API key and acting agent), never for another who happens to send that id."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .caller import Caller


@dataclass(frozen=True)
class RequestKey:
    key: str  # sha256 of the caller, the method and the request id
    fingerprint: str  # sha256 of the request itself, to tell a reused id from a repeat
    # Whose and which call it was, so a forget can find the tenant's cached responses (stores/redis/idempotency).
    tenant_id: str = ""
    method: str = ""


def request_key(caller: Caller, method: str, request_id: str, request: bytes) -> RequestKey:
    who = "\x00".join((caller.tenant_id or "-", caller.key_id, caller.agent_id or "-", method, request_id))
    return RequestKey(hashlib.sha256(who.encode()).hexdigest(), hashlib.sha256(request).hexdigest(),
                      caller.tenant_id or "", method)
