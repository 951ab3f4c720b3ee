"""Builds the AdminService requests from SDK arguments (see _requests for PreparedCall)."""
from __future__ import annotations

from datetime import date
from typing import Mapping

from . import _convert, types
from ._messages import wire
from ._requests import PreparedCall
from .enums import ContentAction, ContentActionLike, DomainAccess, DomainAccessLike, Role, RoleLike
from .v1 import admin_service_pb2 as admin_pb


def create_tenant(
    id: str, *, display_name: str, max_memories: int, create_admin_key: bool
) -> PreparedCall[types.CreatedTenant]:
    """CreateTenant."""
    request = admin_pb.CreateTenantRequest(
        tenant=admin_pb.Tenant(id=id, display_name=display_name, max_memories=max_memories),
        create_admin_key=create_admin_key,
    )
    return PreparedCall("CreateTenant", request, _convert.created_tenant)


def get_tenant(id: str) -> PreparedCall[types.Tenant]:
    """GetTenant."""
    return PreparedCall("GetTenant", admin_pb.GetTenantRequest(id=id), lambda r: _convert.tenant(r.tenant))


def list_tenants(*, page_size: int, page_token: str) -> PreparedCall[types.Page[types.Tenant]]:
    """One page of ListTenants."""
    request = admin_pb.ListTenantsRequest(page_size=page_size, page_token=page_token)
    return PreparedCall("ListTenants", request, lambda r: _convert.page(r.tenants, _convert.tenant, r.next_page_token))


def create_agent(tenant_id: str, id: str, *, display_name: str) -> PreparedCall[types.Agent]:
    """CreateAgent."""
    request = admin_pb.CreateAgentRequest(agent=admin_pb.Agent(tenant_id=tenant_id, id=id, display_name=display_name))
    return PreparedCall("CreateAgent", request, lambda r: _convert.agent(r.agent))


def list_agents(tenant_id: str, *, page_size: int, page_token: str) -> PreparedCall[types.Page[types.Agent]]:
    """One page of ListAgents."""
    request = admin_pb.ListAgentsRequest(tenant_id=tenant_id, page_size=page_size, page_token=page_token)
    return PreparedCall("ListAgents", request, lambda r: _convert.page(r.agents, _convert.agent, r.next_page_token))


def create_api_key(
    *, tenant_id: str | None, agent_id: str | None, role: RoleLike, display_name: str
) -> PreparedCall[types.CreatedApiKey]:
    """CreateApiKey."""
    request = admin_pb.CreateApiKeyRequest(
        tenant_id=tenant_id or "", agent_id=agent_id or "", role=wire(admin_pb.Role, Role.parse(role)), display_name=display_name
    )
    return PreparedCall("CreateApiKey", request, _convert.created_api_key)


def list_api_keys(*, tenant_id: str | None, page_size: int, page_token: str) -> PreparedCall[types.Page[types.ApiKey]]:
    """One page of ListApiKeys."""
    request = admin_pb.ListApiKeysRequest(tenant_id=tenant_id or "", page_size=page_size, page_token=page_token)
    return PreparedCall(
        "ListApiKeys", request, lambda r: _convert.page(r.api_keys, _convert.api_key, r.next_page_token)
    )


def revoke_api_key(id: str) -> PreparedCall[types.ApiKey]:
    """RevokeApiKey."""
    return PreparedCall("RevokeApiKey", admin_pb.RevokeApiKeyRequest(id=id), lambda r: _convert.api_key(r.api_key))


def create_domain(name: str, *, description: str) -> PreparedCall[types.Domain]:
    """CreateDomain."""
    request = admin_pb.CreateDomainRequest(domain=admin_pb.Domain(name=name, description=description))
    return PreparedCall("CreateDomain", request, lambda r: _convert.domain(r.domain))


def list_domains(*, page_size: int, page_token: str) -> PreparedCall[types.Page[types.Domain]]:
    """One page of ListDomains."""
    request = admin_pb.ListDomainsRequest(page_size=page_size, page_token=page_token)
    return PreparedCall("ListDomains", request, lambda r: _convert.page(r.domains, _convert.domain, r.next_page_token))


def grant_domain(domain: str, tenant_id: str, access: DomainAccessLike) -> PreparedCall[types.DomainGrant]:
    """GrantDomain."""
    grant = admin_pb.DomainGrant(domain=domain, tenant_id=tenant_id, access=wire(admin_pb.DomainAccess, DomainAccess.parse(access)))
    return PreparedCall(
        "GrantDomain", admin_pb.GrantDomainRequest(grant=grant), lambda r: _convert.domain_grant(r.grant)
    )


def revoke_domain_grant(domain: str, tenant_id: str) -> PreparedCall[None]:
    """RevokeDomainGrant."""
    request = admin_pb.RevokeDomainGrantRequest(domain=domain, tenant_id=tenant_id)
    return PreparedCall("RevokeDomainGrant", request, lambda r: None)


def list_domain_grants(*, domain: str | None, tenant_id: str | None) -> PreparedCall[tuple[types.DomainGrant, ...]]:
    """ListDomainGrants (not paged by the API)."""
    request = admin_pb.ListDomainGrantsRequest(domain=domain or "", tenant_id=tenant_id or "")
    return PreparedCall(
        "ListDomainGrants", request, lambda r: tuple(_convert.domain_grant(g) for g in r.grants)
    )


def list_audit_events(
    *, tenant_id: str | None, page_size: int, page_token: str
) -> PreparedCall[types.Page[types.AuditEvent]]:
    """One page of ListAuditEvents."""
    request = admin_pb.ListAuditEventsRequest(tenant_id=tenant_id or "", page_size=page_size, page_token=page_token)
    return PreparedCall(
        "ListAuditEvents", request, lambda r: _convert.page(r.events, _convert.audit_event, r.next_page_token)
    )


def get_lifecycle_policy(tenant_id: str | None) -> PreparedCall[types.LifecyclePolicy]:
    """GetLifecyclePolicy."""
    request = admin_pb.GetLifecyclePolicyRequest(tenant_id=tenant_id or "")
    return PreparedCall("GetLifecyclePolicy", request, lambda r: _convert.lifecycle_policy(r.policy))


def set_lifecycle_policy(policy: types.LifecyclePolicy) -> PreparedCall[types.LifecyclePolicy]:
    """SetLifecyclePolicy."""
    request = admin_pb.SetLifecyclePolicyRequest(policy=_convert.lifecycle_policy_pb(policy))
    return PreparedCall("SetLifecyclePolicy", request, lambda r: _convert.lifecycle_policy(r.policy))


def run_lifecycle(tenant_id: str | None, *, dry_run: bool) -> PreparedCall[types.LifecycleReport]:
    """RunLifecycle."""
    request = admin_pb.RunLifecycleRequest(tenant_id=tenant_id or "", dry_run=dry_run)
    return PreparedCall("RunLifecycle", request, lambda r: _convert.lifecycle_report(r.report))


def _content_policy_pb(
    rules: Mapping[str, ContentActionLike], *, tenant_id: str | None, domain: str | None
) -> admin_pb.ContentPolicy:
    pb = admin_pb.ContentPolicy(tenant_id=tenant_id or "", domain=domain or "")
    for name, action in rules.items():
        pb.rules.add(name=name, action=wire(admin_pb.ContentAction, ContentAction.parse(action)))
    return pb


def get_content_policy(tenant_id: str | None, *, domain: str | None) -> PreparedCall[types.ContentPolicy]:
    """GetContentPolicy."""
    request = admin_pb.GetContentPolicyRequest(tenant_id=tenant_id or "", domain=domain or "")
    return PreparedCall("GetContentPolicy", request, lambda r: _convert.content_policy(r.policy))


def set_content_policy(
    rules: Mapping[str, ContentActionLike], *, tenant_id: str | None, domain: str | None
) -> PreparedCall[types.ContentPolicy]:
    """SetContentPolicy."""
    request = admin_pb.SetContentPolicyRequest(policy=_content_policy_pb(rules, tenant_id=tenant_id, domain=domain))
    return PreparedCall("SetContentPolicy", request, lambda r: _convert.content_policy(r.policy))


def reset_content_policy(tenant_id: str | None, *, domain: str | None) -> PreparedCall[types.ContentPolicy]:
    """SetContentPolicy with reset."""
    request = admin_pb.SetContentPolicyRequest(
        policy=_content_policy_pb({}, tenant_id=tenant_id, domain=domain), reset=True)
    return PreparedCall("SetContentPolicy", request, lambda r: _convert.content_policy(r.policy))


def scan_content_policy(
    rules: Mapping[str, ContentActionLike] | None, *, tenant_id: str | None, domain: str | None
) -> PreparedCall[types.ContentScanReport]:
    """ScanContentPolicy."""
    request = admin_pb.ScanContentPolicyRequest(tenant_id=tenant_id or "", domain=domain or "")
    if rules is not None:
        request.proposed.CopyFrom(_content_policy_pb(rules, tenant_id=None, domain=None))
    return PreparedCall("ScanContentPolicy", request, lambda r: _convert.content_scan_report(r.report))


def get_token_usage(tenant_id: str | None, *, start_day: date | None,
                    end_day: date | None) -> PreparedCall[types.TokenUsage]:
    """GetTokenUsage."""
    request = admin_pb.GetTokenUsageRequest(tenant_id=tenant_id or "",
                                            start_day=start_day.isoformat() if start_day else "",
                                            end_day=end_day.isoformat() if end_day else "")
    return PreparedCall("GetTokenUsage", request, _convert.token_usage)


def get_usage(tenant_id: str | None, *, start_day: date | None, end_day: date | None
              ) -> PreparedCall[types.UsageReport]:
    """GetUsage."""
    request = admin_pb.GetUsageRequest(tenant_id=tenant_id or "", start_day=start_day.isoformat() if start_day else "",
                                       end_day=end_day.isoformat() if end_day else "")
    return PreparedCall("GetUsage", request, _convert.usage_report)


def set_token_budget(tenant_id: str, tokens_per_day: int) -> PreparedCall[types.TokenBudget]:
    """SetTokenBudget."""
    request = admin_pb.SetTokenBudgetRequest(tenant_id=tenant_id, tokens_per_day=tokens_per_day)
    return PreparedCall("SetTokenBudget", request, lambda r: _convert.token_budget(r.budget))


def reset_token_budget(tenant_id: str) -> PreparedCall[types.TokenBudget]:
    """SetTokenBudget with reset."""
    request = admin_pb.SetTokenBudgetRequest(tenant_id=tenant_id, reset=True)
    return PreparedCall("SetTokenBudget", request, lambda r: _convert.token_budget(r.budget))
