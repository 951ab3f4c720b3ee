"""Resolves an API key (and an optional acting agent) to a Caller, with a short cache."""
from __future__ import annotations

import time

from ...core.access.caller import Caller, Role
from ...core.access.keys import secret_matches, split_key
from ...core.errors import Code, MemplaneError, not_found
from ...core.validation import check_identifier
from ...stores.postgres.tenancy import TenancyStore

# Revocations and grant changes take effect within this many seconds on every instance.
CACHE_SECONDS = 2.0
_DUMMY_HASH = b"\x00" * 32
# The key id of work the service queues itself (scheduled consolidations, summary refreshes, policies).
SYSTEM_KEY_PREFIX = "system:"


def unauthenticated(message: str = "a valid API key is required") -> MemplaneError:
    return MemplaneError(Code.UNAUTHENTICATED, "INVALID_API_KEY", message)


class Authenticator:
    def __init__(self, tenancy: TenancyStore) -> None:
        self.tenancy = tenancy
        self._cache: dict[tuple[str, str | None], tuple[float, Caller]] = {}  # (looked up at, caller)

    def cached(self, presented: str | None, acting_agent: str | None) -> Caller | None:
        """The key's caller when it was looked up within CACHE_SECONDS, without a lookup."""
        hit = self._cache.get((presented, acting_agent)) if presented else None
        return hit[1] if hit and time.monotonic() - hit[0] < CACHE_SECONDS else None

    async def resolve(self, presented: str | None, acting_agent: str | None, *, max_age: float = CACHE_SECONDS) -> Caller:
        """The key's caller, from the cache when it was looked up within max_age seconds: a
        long-lived stream asks with a shorter max_age than a call, so that its streams share one
        lookup yet notice a revocation in time."""
        if not presented:
            raise MemplaneError(Code.UNAUTHENTICATED, "API_KEY_REQUIRED", "send `authorization: Bearer <api key>`")
        cache_key = (presented, acting_agent)
        hit = self._cache.get(cache_key)
        if hit and time.monotonic() - hit[0] < min(max_age, CACHE_SECONDS):
            return hit[1]
        looked_up_at = time.monotonic()
        caller = await self._resolve(presented, acting_agent)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[cache_key] = (looked_up_at, caller)
        return caller

    async def _resolve(self, presented: str, acting_agent: str | None) -> Caller:
        parts = split_key(presented)
        key = await self.tenancy.get_key(parts[0]) if parts else None
        # Compare against something even when the key id is unknown, so timing does not tell.
        valid = secret_matches(parts[1] if parts else presented, key.secret_hash if key else _DUMMY_HASH)
        if key is None or not valid or key.revoked_at is not None:
            raise unauthenticated()
        agent = key.agent_id
        if acting_agent:
            if agent is not None and acting_agent != agent:
                raise MemplaneError(Code.PERMISSION_DENIED, "AGENT_MISMATCH", "this key is bound to another agent")
            if key.role is Role.PLATFORM_ADMIN:
                raise MemplaneError(Code.PERMISSION_DENIED, "NO_TENANT", "platform admin keys act on no tenant")
            assert key.tenant_id is not None, "the api_keys table holds no tenant for platform admin keys only"
            check_identifier(acting_agent, "agent")
            if not await self.tenancy.agent_exists(key.tenant_id, acting_agent):
                raise not_found("agent")
            agent = acting_agent
        domains = await self.tenancy.grants_of(key.tenant_id) if key.tenant_id else {}
        return Caller(key_id=key.id, role=key.role, tenant_id=key.tenant_id, agent_id=agent, domains=domains)


def key_revoked() -> MemplaneError:
    return MemplaneError(Code.PERMISSION_DENIED, "API_KEY_REVOKED",
                         "the API key that queued this operation was revoked (or deleted) before it finished")


async def reload_caller(tenancy: TenancyStore, queued: Caller) -> Caller:
    """A queued job's caller as its key and its tenant's grants are now: the job does what the key
    may do when it runs, not what it could when it was queued. Work the service queued itself
    (key ids `system:*`) has no key; it keeps its role with the tenant's current grants."""
    tenant_id = queued.tenant_id
    if tenant_id is None:
        raise MemplaneError(Code.PERMISSION_DENIED, "NO_TENANT", "a job acts on a tenant")
    if not queued.key_id.startswith(SYSTEM_KEY_PREFIX):
        key = await tenancy.get_key(queued.key_id)
        if key is None or key.revoked_at is not None or key.tenant_id != tenant_id:
            raise key_revoked()
        if key.agent_id is not None and key.agent_id != queued.agent_id:
            raise MemplaneError(Code.PERMISSION_DENIED, "AGENT_MISMATCH", "this key is bound to another agent")
        queued = Caller(key_id=key.id, role=key.role, tenant_id=tenant_id, agent_id=queued.agent_id)
    return Caller(key_id=queued.key_id, role=queued.role, tenant_id=tenant_id, agent_id=queued.agent_id,
                  domains=await tenancy.grants_of(tenant_id))
