# Generated from memplane/_admin_aio.py by scripts/gen_sync_client.py: do not edit by hand.
# Change _admin_aio.py and run `make generate`.
"""The client of AdminService: tenants, agents, API keys, domains, grants, the audit log and the
tenants' lifecycle and content policies."""
from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import TYPE_CHECKING

from . import _admin_requests
from ._transport import SyncClientBase
from .enums import (
    ContentActionLike,
    DomainAccessLike,
    RoleLike,
)
from .types import (
    Agent,
    ApiKey,
    AuditEvent,
    ContentPolicy,
    ContentScanReport,
    CreatedApiKey,
    CreatedTenant,
    Domain,
    DomainGrant,
    LifecyclePolicy,
    LifecycleReport,
    Page,
    Tenant,
    TokenBudget,
    TokenUsage,
    UsageReport,
)

if TYPE_CHECKING:
    pass


class AdminClient(SyncClientBase):
    """Blocking client for AdminService: tenants, agents, API keys, domains, grants, the audit log
    and lifecycle policies; timeouts and errors behave as in MemoryClient.

    Tenants, domains and grants need a platform admin key; a tenant admin key manages the agents
    and keys of its own tenant. The admin mutations carry no request_id, so they are never retried.
    """

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
            _admin_requests.create_tenant(
                id, display_name=display_name, max_memories=max_memories, create_admin_key=create_admin_key
            ),
            timeout,
        )

    def get_tenant(self, id: str, *, timeout: float | None = None) -> Tenant:
        """Reads a tenant."""
        return self._transport.call(_admin_requests.get_tenant(id), timeout)

    def list_tenants(
        self, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> Page[Tenant]:
        """One page of tenants, ordered by id."""
        return self._transport.call(
            _admin_requests.list_tenants(page_size=page_size, page_token=page_token), timeout
        )

    def create_agent(
        self, tenant_id: str, id: str, *, display_name: str = "", timeout: float | None = None
    ) -> Agent:
        """Creates an agent inside a tenant."""
        return self._transport.call(
            _admin_requests.create_agent(tenant_id, id, display_name=display_name), timeout
        )

    def list_agents(
        self, tenant_id: str, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> Page[Agent]:
        """One page of a tenant's agents, ordered by id."""
        return self._transport.call(
            _admin_requests.list_agents(tenant_id, page_size=page_size, page_token=page_token), timeout
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
            _admin_requests.create_api_key(
                tenant_id=tenant_id, agent_id=agent_id, role=role, display_name=display_name
            ),
            timeout,
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
            _admin_requests.list_api_keys(tenant_id=tenant_id, page_size=page_size, page_token=page_token), timeout
        )

    def revoke_api_key(self, id: str, *, timeout: float | None = None) -> ApiKey:
        """Revokes an API key and returns it."""
        return self._transport.call(_admin_requests.revoke_api_key(id), timeout)

    def create_domain(self, name: str, *, description: str = "", timeout: float | None = None) -> Domain:
        """Creates a domain."""
        return self._transport.call(_admin_requests.create_domain(name, description=description), timeout)

    def list_domains(
        self, *, page_size: int = 0, page_token: str = "", timeout: float | None = None
    ) -> Page[Domain]:
        """One page of domains, ordered by name."""
        return self._transport.call(
            _admin_requests.list_domains(page_size=page_size, page_token=page_token), timeout
        )

    def grant_domain(
        self, domain: str, tenant_id: str, access: DomainAccessLike, *, timeout: float | None = None
    ) -> DomainGrant:
        """Grants a tenant read or read-write membership of a domain, replacing any existing grant."""
        return self._transport.call(_admin_requests.grant_domain(domain, tenant_id, access), timeout)

    def revoke_domain_grant(self, domain: str, tenant_id: str, *, timeout: float | None = None) -> None:
        """Removes a tenant's membership of a domain."""
        return self._transport.call(_admin_requests.revoke_domain_grant(domain, tenant_id), timeout)

    def list_domain_grants(
        self, *, domain: str | None = None, tenant_id: str | None = None, timeout: float | None = None
    ) -> tuple[DomainGrant, ...]:
        """The grants of a domain and/or of a tenant, ordered by domain and tenant."""
        return self._transport.call(
            _admin_requests.list_domain_grants(domain=domain, tenant_id=tenant_id), timeout
        )

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
            _admin_requests.list_audit_events(tenant_id=tenant_id, page_size=page_size, page_token=page_token), timeout
        )

    def get_lifecycle_policy(
        self, tenant_id: str | None = None, *, timeout: float | None = None
    ) -> LifecyclePolicy:
        """A tenant's lifecycle policy (the key's tenant by default), every kind listed; the defaults
        (is_set False, not enabled) when none was set."""
        return self._transport.call(_admin_requests.get_lifecycle_policy(tenant_id), timeout)

    def set_lifecycle_policy(
        self, policy: LifecyclePolicy, *, timeout: float | None = None
    ) -> LifecyclePolicy:
        """Sets a tenant's lifecycle policy (policy.tenant_id, or the key's tenant) and returns it as stored."""
        return self._transport.call(_admin_requests.set_lifecycle_policy(policy), timeout)

    def run_lifecycle(
        self, tenant_id: str | None = None, *, dry_run: bool = False, timeout: float | None = None
    ) -> LifecycleReport:
        """Runs a tenant's lifecycle policy now; dry_run reports what it would do and changes nothing."""
        return self._transport.call(_admin_requests.run_lifecycle(tenant_id, dry_run=dry_run), timeout)

    def get_content_policy(
        self, tenant_id: str | None = None, *, domain: str | None = None, timeout: float | None = None
    ) -> ContentPolicy:
        """A tenant's content policy (the key's tenant by default) or a domain's, every detector's
        action listed in effective; the defaults (is_set False) when none was set."""
        return self._transport.call(_admin_requests.get_content_policy(tenant_id, domain=domain), timeout)

    def set_content_policy(
        self, rules: Mapping[str, ContentActionLike], *, tenant_id: str | None = None, domain: str | None = None,
        timeout: float | None = None,
    ) -> ContentPolicy:
        """Replaces a tenant's (the key's by default) or a domain's content policy rules, by detector or
        category ("secret", "personal") to off/tag/redact/refuse; what they do not name takes the defaults.
        At least one rule: empty rules are InvalidArgumentError (CONTENT_POLICY_REQUIRED), and
        reset_content_policy goes back to the defaults."""
        return self._transport.call(
            _admin_requests.set_content_policy(rules, tenant_id=tenant_id, domain=domain), timeout)

    def reset_content_policy(
        self, tenant_id: str | None = None, *, domain: str | None = None, timeout: float | None = None
    ) -> ContentPolicy:
        """Drops every rule of a tenant's (the key's by default) or a domain's content policy: each
        detector takes the defaults again. Returns the policy as stored."""
        return self._transport.call(_admin_requests.reset_content_policy(tenant_id, domain=domain), timeout)

    def scan_content_policy(
        self, rules: Mapping[str, ContentActionLike] | None = None, *, tenant_id: str | None = None,
        domain: str | None = None, timeout: float | None = None,
    ) -> ContentScanReport:
        """What the given rules (the policy in force without them) would change in the memories
        already stored; changes nothing."""
        return self._transport.call(
            _admin_requests.scan_content_policy(rules, tenant_id=tenant_id, domain=domain), timeout)

    def get_token_usage(
        self, tenant_id: str | None = None, *, start_day: date | None = None, end_day: date | None = None,
        timeout: float | None = None,
    ) -> TokenUsage:
        """A tenant's LLM tokens (the key's tenant by default) by UTC day, stage and model, from start_day
        (default: 29 days before end_day) to end_day (default: today), its budget and today's spend."""
        return self._transport.call(
            _admin_requests.get_token_usage(tenant_id, start_day=start_day, end_day=end_day), timeout)

    def get_usage(
        self, tenant_id: str | None = None, *, start_day: date | None = None, end_day: date | None = None,
        timeout: float | None = None,
    ) -> UsageReport:
        """What a tenant used (the key's tenant by default; for a platform admin, None means every
        tenant with usage) by UTC day: calls by method, texts embedded, LLM tokens by stage, memories
        and bytes stored by layer and scope; from start_day (default: 29 days before end_day) to
        end_day (default: today). `.rows()` gives them as (tenant, day, metric, name, value)."""
        return self._transport.call(
            _admin_requests.get_usage(tenant_id, start_day=start_day, end_day=end_day), timeout)

    def set_token_budget(
        self, tenant_id: str, tokens_per_day: int, *, timeout: float | None = None
    ) -> TokenBudget:
        """Sets the tenant's LLM tokens per UTC day (0: unlimited); needs a platform admin key. Once a
        tenant spent it, its LLM stages go on without the model until the next UTC day."""
        return self._transport.call(_admin_requests.set_token_budget(tenant_id, tokens_per_day), timeout)

    def reset_token_budget(self, tenant_id: str, *, timeout: float | None = None) -> TokenBudget:
        """Drops the tenant's own budget: the server's default applies again. Returns it."""
        return self._transport.call(_admin_requests.reset_token_budget(tenant_id), timeout)
