"""AdminClient and AsyncAdminClient: tenants, agents, API keys, domains, grants and the audit log.

Tenants, domains and grants need a platform admin key; a tenant admin key manages the agents
and keys of its own tenant. The admin mutations carry no request_id, so they are never retried.
"""
from __future__ import annotations

from . import _admin_requests as req
from ._transport import AsyncClientBase, SyncClientBase
from .enums import DomainAccessLike, RoleLike
from .types import (
    Agent,
    ApiKey,
    AuditEvent,
    CreatedApiKey,
    CreatedTenant,
    Domain,
    DomainGrant,
    LifecyclePolicy,
    LifecycleReport,
    Page,
    Tenant,
)


class AdminClient(SyncClientBase):
    """Blocking client for AdminService; timeouts and errors behave as in MemoryClient."""

    def create_tenant(
        self,
        id: str,
        *,
        display_name: str = "",
        max_memories: int = 0,
        create_admin_key: bool = False,
        timeout: float | None = None,
    ) -> CreatedTenant:
        """Creates a tenant, and with create_admin_key also a tenant admin key (secret shown once)."""
        return self._transport.call(
            req.create_tenant(
                id, display_name=display_name, max_memories=max_memories, create_admin_key=create_admin_key
            ),
            timeout,
        )

    def get_tenant(self, id: str, *, timeout: float | None = None) -> Tenant:
        """Reads a tenant."""
        return self._transport.call(req.get_tenant(id), timeout)

    def list_tenants(
        self, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> Page[Tenant]:
        """One page of tenants, ordered by id."""
        return self._transport.call(req.list_tenants(page_size=page_size, page_token=page_token), timeout)

    def create_agent(
        self, tenant_id: str, id: str, *, display_name: str = "", timeout: float | None = None
    ) -> Agent:
        """Creates an agent inside a tenant."""
        return self._transport.call(req.create_agent(tenant_id, id, display_name=display_name), timeout)

    def list_agents(
        self, tenant_id: str, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> Page[Agent]:
        """One page of a tenant's agents, ordered by id."""
        return self._transport.call(
            req.list_agents(tenant_id, page_size=page_size, page_token=page_token), timeout
        )

    def create_api_key(
        self,
        *,
        tenant_id: str | None = None,
        agent_id: str | None = None,
        role: RoleLike,
        display_name: str = "",
        timeout: float | None = None,
    ) -> CreatedApiKey:
        """Creates an API key; its secret is returned only here."""
        return self._transport.call(
            req.create_api_key(tenant_id=tenant_id, agent_id=agent_id, role=role, display_name=display_name), timeout
        )

    def list_api_keys(
        self,
        *,
        tenant_id: str | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> Page[ApiKey]:
        """One page of a tenant's keys (platform admin keys when tenant_id is None), never their secrets."""
        return self._transport.call(
            req.list_api_keys(tenant_id=tenant_id, page_size=page_size, page_token=page_token), timeout
        )

    def revoke_api_key(self, id: str, *, timeout: float | None = None) -> ApiKey:
        """Revokes an API key and returns it."""
        return self._transport.call(req.revoke_api_key(id), timeout)

    def create_domain(self, name: str, *, description: str = "", timeout: float | None = None) -> Domain:
        """Creates a domain."""
        return self._transport.call(req.create_domain(name, description=description), timeout)

    def list_domains(
        self, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> Page[Domain]:
        """One page of domains, ordered by name."""
        return self._transport.call(req.list_domains(page_size=page_size, page_token=page_token), timeout)

    def grant_domain(
        self, domain: str, tenant_id: str, access: DomainAccessLike, *, timeout: float | None = None
    ) -> DomainGrant:
        """Grants a tenant read or read-write membership of a domain, replacing any existing grant."""
        return self._transport.call(req.grant_domain(domain, tenant_id, access), timeout)

    def revoke_domain_grant(self, domain: str, tenant_id: str, *, timeout: float | None = None) -> None:
        """Removes a tenant's membership of a domain."""
        return self._transport.call(req.revoke_domain_grant(domain, tenant_id), timeout)

    def list_domain_grants(
        self, *, domain: str | None = None, tenant_id: str | None = None, timeout: float | None = None
    ) -> tuple[DomainGrant, ...]:
        """The grants of a domain and/or of a tenant, ordered by domain and tenant."""
        return self._transport.call(req.list_domain_grants(domain=domain, tenant_id=tenant_id), timeout)

    def list_audit_events(
        self,
        *,
        tenant_id: str | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> Page[AuditEvent]:
        """One page of the audit log (admin actions and forgets), newest first."""
        return self._transport.call(
            req.list_audit_events(tenant_id=tenant_id, page_size=page_size, page_token=page_token), timeout
        )

    def get_lifecycle_policy(
        self, tenant_id: str | None = None, *, timeout: float | None = None
    ) -> LifecyclePolicy:
        """A tenant's lifecycle policy (the key's tenant by default), every kind listed; the defaults
        (is_set False, not enabled) when none was set."""
        return self._transport.call(req.get_lifecycle_policy(tenant_id), timeout)

    def set_lifecycle_policy(
        self, policy: LifecyclePolicy, *, timeout: float | None = None
    ) -> LifecyclePolicy:
        """Sets a tenant's lifecycle policy (policy.tenant_id, or the key's tenant) and returns it as stored."""
        return self._transport.call(req.set_lifecycle_policy(policy), timeout)

    def run_lifecycle(
        self, tenant_id: str | None = None, *, dry_run: bool = False, timeout: float | None = None
    ) -> LifecycleReport:
        """Runs a tenant's lifecycle policy now; dry_run reports what it would do and changes nothing."""
        return self._transport.call(req.run_lifecycle(tenant_id, dry_run=dry_run), timeout)


class AsyncAdminClient(AsyncClientBase):
    """Asyncio twin of AdminClient, with coroutines in place of calls."""

    async def create_tenant(
        self,
        id: str,
        *,
        display_name: str = "",
        max_memories: int = 0,
        create_admin_key: bool = False,
        timeout: float | None = None,
    ) -> CreatedTenant:
        """Creates a tenant, and with create_admin_key also a tenant admin key (secret shown once)."""
        return await self._transport.call(
            req.create_tenant(
                id, display_name=display_name, max_memories=max_memories, create_admin_key=create_admin_key
            ),
            timeout,
        )

    async def get_tenant(self, id: str, *, timeout: float | None = None) -> Tenant:
        """Reads a tenant."""
        return await self._transport.call(req.get_tenant(id), timeout)

    async def list_tenants(
        self, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> Page[Tenant]:
        """One page of tenants, ordered by id."""
        return await self._transport.call(req.list_tenants(page_size=page_size, page_token=page_token), timeout)

    async def create_agent(
        self, tenant_id: str, id: str, *, display_name: str = "", timeout: float | None = None
    ) -> Agent:
        """Creates an agent inside a tenant."""
        return await self._transport.call(req.create_agent(tenant_id, id, display_name=display_name), timeout)

    async def list_agents(
        self, tenant_id: str, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> Page[Agent]:
        """One page of a tenant's agents, ordered by id."""
        return await self._transport.call(
            req.list_agents(tenant_id, page_size=page_size, page_token=page_token), timeout
        )

    async def create_api_key(
        self,
        *,
        tenant_id: str | None = None,
        agent_id: str | None = None,
        role: RoleLike,
        display_name: str = "",
        timeout: float | None = None,
    ) -> CreatedApiKey:
        """Creates an API key; its secret is returned only here."""
        return await self._transport.call(
            req.create_api_key(tenant_id=tenant_id, agent_id=agent_id, role=role, display_name=display_name), timeout
        )

    async def list_api_keys(
        self,
        *,
        tenant_id: str | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> Page[ApiKey]:
        """One page of a tenant's keys (platform admin keys when tenant_id is None), never their secrets."""
        return await self._transport.call(
            req.list_api_keys(tenant_id=tenant_id, page_size=page_size, page_token=page_token), timeout
        )

    async def revoke_api_key(self, id: str, *, timeout: float | None = None) -> ApiKey:
        """Revokes an API key and returns it."""
        return await self._transport.call(req.revoke_api_key(id), timeout)

    async def create_domain(self, name: str, *, description: str = "", timeout: float | None = None) -> Domain:
        """Creates a domain."""
        return await self._transport.call(req.create_domain(name, description=description), timeout)

    async def list_domains(
        self, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> Page[Domain]:
        """One page of domains, ordered by name."""
        return await self._transport.call(req.list_domains(page_size=page_size, page_token=page_token), timeout)

    async def grant_domain(
        self, domain: str, tenant_id: str, access: DomainAccessLike, *, timeout: float | None = None
    ) -> DomainGrant:
        """Grants a tenant read or read-write membership of a domain, replacing any existing grant."""
        return await self._transport.call(req.grant_domain(domain, tenant_id, access), timeout)

    async def revoke_domain_grant(self, domain: str, tenant_id: str, *, timeout: float | None = None) -> None:
        """Removes a tenant's membership of a domain."""
        return await self._transport.call(req.revoke_domain_grant(domain, tenant_id), timeout)

    async def list_domain_grants(
        self, *, domain: str | None = None, tenant_id: str | None = None, timeout: float | None = None
    ) -> tuple[DomainGrant, ...]:
        """The grants of a domain and/or of a tenant, ordered by domain and tenant."""
        return await self._transport.call(req.list_domain_grants(domain=domain, tenant_id=tenant_id), timeout)

    async def list_audit_events(
        self,
        *,
        tenant_id: str | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> Page[AuditEvent]:
        """One page of the audit log (admin actions and forgets), newest first."""
        return await self._transport.call(
            req.list_audit_events(tenant_id=tenant_id, page_size=page_size, page_token=page_token), timeout
        )

    async def get_lifecycle_policy(
        self, tenant_id: str | None = None, *, timeout: float | None = None
    ) -> LifecyclePolicy:
        """A tenant's lifecycle policy (the key's tenant by default), every kind listed; the defaults
        (is_set False, not enabled) when none was set."""
        return await self._transport.call(req.get_lifecycle_policy(tenant_id), timeout)

    async def set_lifecycle_policy(
        self, policy: LifecyclePolicy, *, timeout: float | None = None
    ) -> LifecyclePolicy:
        """Sets a tenant's lifecycle policy (policy.tenant_id, or the key's tenant) and returns it as stored."""
        return await self._transport.call(req.set_lifecycle_policy(policy), timeout)

    async def run_lifecycle(
        self, tenant_id: str | None = None, *, dry_run: bool = False, timeout: float | None = None
    ) -> LifecycleReport:
        """Runs a tenant's lifecycle policy now; dry_run reports what it would do and changes nothing."""
        return await self._transport.call(req.run_lifecycle(tenant_id, dry_run=dry_run), timeout)
