"""AdminService: protobuf in, use case, protobuf out."""
from __future__ import annotations

import json

from memplane.v1 import admin_service_pb2 as apb
from memplane.v1 import admin_service_pb2_grpc as apb_grpc

from ..core.access.caller import Role
from ..core.access.tenancy import Agent, ApiKey, AuditEvent, Domain, DomainGrant, Tenant
from ..core.usage import parse_day
from ..services.registry import Services
from . import content_convert, usage_convert
from .context import current_caller
from .convert import enum_in, ts_out
from .lifecycle_convert import policy_in, policy_out, report_out

ROLES = {apb.ROLE_PLATFORM_ADMIN: Role.PLATFORM_ADMIN, apb.ROLE_TENANT_ADMIN: Role.TENANT_ADMIN,
         apb.ROLE_WRITER: Role.WRITER, apb.ROLE_READER: Role.READER, apb.ROLE_AGENT: Role.AGENT}
ACCESS = {apb.DOMAIN_ACCESS_READ: False, apb.DOMAIN_ACCESS_READ_WRITE: True}


def tenant_out(tenant: Tenant, t: apb.Tenant) -> None:
    t.id, t.display_name, t.max_memories = tenant.id, tenant.display_name, tenant.max_memories
    ts_out(t.create_time, tenant.created_at)


def agent_out(agent: Agent, a: apb.Agent) -> None:
    a.tenant_id, a.id, a.display_name = agent.tenant_id, agent.id, agent.display_name
    ts_out(a.create_time, agent.created_at)


def key_out(key: ApiKey, k: apb.ApiKey) -> None:
    k.id, k.tenant_id, k.agent_id = key.id, key.tenant_id or "", key.agent_id or ""
    k.role = next(n for n, r in ROLES.items() if r is key.role)
    k.display_name = key.display_name
    ts_out(k.create_time, key.created_at)
    ts_out(k.revoke_time, key.revoked_at)


def domain_out(domain: Domain, d: apb.Domain) -> None:
    d.name, d.description = domain.name, domain.description
    ts_out(d.create_time, domain.created_at)


def grant_out(grant: DomainGrant, g: apb.DomainGrant) -> None:
    g.domain, g.tenant_id = grant.domain, grant.tenant_id
    g.access = apb.DOMAIN_ACCESS_READ_WRITE if grant.can_write else apb.DOMAIN_ACCESS_READ
    ts_out(g.create_time, grant.created_at)


def event_out(event: AuditEvent, e: apb.AuditEvent) -> None:
    e.id, e.tenant_id, e.actor_key_id = str(event.id), event.tenant_id or "", event.actor_key_id
    e.action, e.target, e.details_json = event.action, event.target, json.dumps(event.details, ensure_ascii=False)
    ts_out(e.event_time, event.created_at)


class AdminServicer(apb_grpc.AdminServiceServicer):
    def __init__(self, services: Services) -> None:
        self.admin = services.admin
        self.lifecycle = services.lifecycle
        self.content_policies = services.content_policies
        self.token_usage = services.token_usage
        self.metering = services.metering

    async def CreateTenant(self, request, context):
        tenant, key, secret = await self.admin.create_tenant(
            current_caller(), request.tenant.id, request.tenant.display_name, request.tenant.max_memories,
            request.create_admin_key,
        )
        response = apb.CreateTenantResponse(admin_key_secret=secret)
        tenant_out(tenant, response.tenant)
        if key is not None:
            key_out(key, response.admin_key)
        return response

    async def GetTenant(self, request, context):
        response = apb.GetTenantResponse()
        tenant_out(await self.admin.get_tenant(current_caller(), request.id), response.tenant)
        return response

    async def ListTenants(self, request, context):
        tenants, token = await self.admin.list_tenants(current_caller(), request.page_size, request.page_token)
        response = apb.ListTenantsResponse(next_page_token=token)
        for tenant in tenants:
            tenant_out(tenant, response.tenants.add())
        return response

    async def CreateAgent(self, request, context):
        a = request.agent
        response = apb.CreateAgentResponse()
        agent_out(await self.admin.create_agent(current_caller(), a.tenant_id, a.id, a.display_name), response.agent)
        return response

    async def ListAgents(self, request, context):
        agents, token = await self.admin.list_agents(
            current_caller(), request.tenant_id, request.page_size, request.page_token
        )
        response = apb.ListAgentsResponse(next_page_token=token)
        for agent in agents:
            agent_out(agent, response.agents.add())
        return response

    async def CreateApiKey(self, request, context):
        key, secret = await self.admin.create_api_key(
            current_caller(), request.tenant_id or None, request.agent_id or None,
            enum_in(ROLES, request.role, "role"), request.display_name,
        )
        response = apb.CreateApiKeyResponse(secret=secret)
        key_out(key, response.api_key)
        return response

    async def ListApiKeys(self, request, context):
        keys, token = await self.admin.list_api_keys(
            current_caller(), request.tenant_id, request.page_size, request.page_token
        )
        response = apb.ListApiKeysResponse(next_page_token=token)
        for key in keys:
            key_out(key, response.api_keys.add())
        return response

    async def RevokeApiKey(self, request, context):
        response = apb.RevokeApiKeyResponse()
        key_out(await self.admin.revoke_api_key(current_caller(), request.id), response.api_key)
        return response

    async def CreateDomain(self, request, context):
        response = apb.CreateDomainResponse()
        domain = await self.admin.create_domain(current_caller(), request.domain.name, request.domain.description)
        domain_out(domain, response.domain)
        return response

    async def ListDomains(self, request, context):
        domains, token = await self.admin.list_domains(current_caller(), request.page_size, request.page_token)
        response = apb.ListDomainsResponse(next_page_token=token)
        for domain in domains:
            domain_out(domain, response.domains.add())
        return response

    async def GrantDomain(self, request, context):
        g = request.grant
        grant = await self.admin.grant_domain(
            current_caller(), g.domain, g.tenant_id, enum_in(ACCESS, g.access, "grant.access")
        )
        response = apb.GrantDomainResponse()
        grant_out(grant, response.grant)
        return response

    async def RevokeDomainGrant(self, request, context):
        await self.admin.revoke_domain_grant(current_caller(), request.domain, request.tenant_id)
        return apb.RevokeDomainGrantResponse()

    async def ListDomainGrants(self, request, context):
        grants = await self.admin.list_domain_grants(current_caller(), request.domain, request.tenant_id)
        response = apb.ListDomainGrantsResponse()
        for grant in grants:
            grant_out(grant, response.grants.add())
        return response

    async def ListAuditEvents(self, request, context):
        events, token = await self.admin.list_audit_events(
            current_caller(), request.tenant_id, request.page_size, request.page_token
        )
        response = apb.ListAuditEventsResponse(next_page_token=token)
        for event in events:
            event_out(event, response.events.add())
        return response

    async def SetLifecyclePolicy(self, request, context):
        caller = current_caller()
        tenant = request.policy.tenant_id or caller.tenant_id or ""
        await self.lifecycle.set_policy(caller, tenant, policy_in(request.policy))
        return await self._policy_response(apb.SetLifecyclePolicyResponse(), tenant)

    async def GetLifecyclePolicy(self, request, context):
        return await self._policy_response(apb.GetLifecyclePolicyResponse(), request.tenant_id)

    async def _policy_response(self, response, tenant_id: str):
        caller = current_caller()
        tenant = tenant_id or caller.tenant_id or ""
        policy, stored = await self.lifecycle.get_policy(caller, tenant)
        policy_out(tenant, policy, stored is not None, stored.updated_at if stored else None, response.policy)
        return response

    async def RunLifecycle(self, request, context):
        response = apb.RunLifecycleResponse()
        report = await self.lifecycle.run(current_caller(), request.tenant_id, dry_run=request.dry_run)
        report_out(report, response.report)
        return response

    async def SetContentPolicy(self, request, context):
        p = request.policy
        view = await self.content_policies.set(current_caller(), p.tenant_id, p.domain, content_convert.rules_in(p),
                                               reset=request.reset)
        response = apb.SetContentPolicyResponse()
        content_convert.policy_out(view, response.policy)
        return response

    async def GetContentPolicy(self, request, context):
        view = await self.content_policies.get(current_caller(), request.tenant_id, request.domain)
        response = apb.GetContentPolicyResponse()
        content_convert.policy_out(view, response.policy)
        return response

    async def ScanContentPolicy(self, request, context):
        proposed = content_convert.rules_in(request.proposed) if request.HasField("proposed") else None
        report = await self.content_policies.scan(current_caller(), request.tenant_id, request.domain, proposed)
        response = apb.ScanContentPolicyResponse()
        content_convert.report_out(report, response.report)
        return response

    async def GetTokenUsage(self, request, context):
        report = await self.token_usage.report(current_caller(), request.tenant_id,
                                               parse_day(request.start_day, "start_day"),
                                               parse_day(request.end_day, "end_day"))
        response = apb.GetTokenUsageResponse()
        usage_convert.report_out(report, response)
        return response

    async def GetUsage(self, request, context):
        first, last, usages = await self.metering.report(current_caller(), request.tenant_id,
                                                         parse_day(request.start_day, "start_day"),
                                                         parse_day(request.end_day, "end_day"))
        response = apb.GetUsageResponse()
        usage_convert.usage_out(first, last, usages, response)
        return response

    async def SetTokenBudget(self, request, context):
        caller = current_caller()
        tokens = request.tokens_per_day if request.HasField("tokens_per_day") else None
        budget = await self.token_usage.set_budget(caller, request.tenant_id, tokens, reset=request.reset)
        response = apb.SetTokenBudgetResponse()
        usage_convert.budget_out(request.tenant_id or caller.tenant_id or "", budget, response.budget)
        return response
