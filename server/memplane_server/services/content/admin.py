"""Content policies as admins see them: a tenant admin sets and reads the tenant's, a platform admin
any tenant's and the domains'; a dry-run scan reports what a policy would change in the memories
already stored. Every change is audited and reaches this server's writes at once (others' within
MEMPLANE_CONTENT_POLICY_CACHE_SECONDS)."""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

from ...core.access.caller import Caller, Role
from ...core.content.policy import (
    Action,
    Actions,
    ContentPolicy,
    PolicyView,
    check_rules,
    domain_policy,
    rules_from_json,
    rules_to_json,
    tenant_policy,
)
from ...core.content.scan import ScanReport
from ...core.content.screen import Screened, screen
from ...core.errors import denied, invalid, not_found
from ...core.model import MemoryDraft, Scope
from ...core.validation import check_identifier
from ...stores.postgres.content.policies import StoredRules, StoredText
from ...stores.postgres.tenancy import MissingParentError, TenancyStore
from ..admin import administered_tenant
from ..cpu import CpuLane
from .policies import ContentPolicies

SCAN_BATCH = 500


def _view(tenant_id: str | None, domain: str | None, policy: ContentPolicy, stored: StoredRules | None) -> PolicyView:
    return PolicyView(tenant_id, domain, dict(policy.rules), policy.effective(), stored is not None,
                      stored.updated_at if stored else None, stored.updated_by if stored else "")


def _draft(text: StoredText) -> MemoryDraft:
    return MemoryDraft(scope=Scope.DOMAIN if text.domain else None, domain=text.domain, agent_id=None, layer=None,
                       kind=None, content=text.content, context=text.context, value=text.value,
                       metadata=text.metadata, tags=text.tags)


def _screen_all(pairs: list[tuple[StoredText, Actions]]) -> list[Screened]:
    return [screen(_draft(text), actions) for text, actions in pairs]


@dataclass(frozen=True)
class ContentPolicyDeps:
    """What content policy administration draws on, filled by the composition root (services/deps.py)."""

    content: ContentPolicies
    tenancy: TenancyStore  # who administers a tenant
    cpu: CpuLane  # a scan's detectors, off the event loop

class ContentPolicyService:
    def __init__(self, deps: ContentPolicyDeps) -> None:
        self.deps = deps

    async def _target(self, caller: Caller, tenant_id: str, domain: str) -> tuple[str | None, str | None]:
        """Which policy a call is about: a domain's (platform admins set it; admins of a member tenant
        may read it), else a tenant's (its own admin, or a platform admin)."""
        if domain:
            check_identifier(domain, "domain")
            if tenant_id:
                raise invalid("TENANT_OR_DOMAIN", "a content policy belongs to a tenant or to a domain, not both")
            return None, domain
        return await administered_tenant(self.deps.tenancy, caller, tenant_id), None

    @staticmethod
    def _platform(caller: Caller) -> None:
        if caller.role is not Role.PLATFORM_ADMIN:
            raise denied("PLATFORM_ADMIN_REQUIRED", "a domain's content policy is set by a platform admin")

    async def get(self, caller: Caller, tenant_id: str, domain: str) -> PolicyView:
        tenant, domain_name = await self._target(caller, tenant_id, domain)
        if domain_name:
            member = caller.role is Role.TENANT_ADMIN and domain_name in caller.domains
            if not member:
                self._platform(caller)
            stored = (await self.deps.content.store.domain_rules([domain_name])).get(domain_name)
            return _view(None, domain_name, domain_policy(rules_from_json(stored.rules) if stored else {}), stored)
        assert tenant
        stored_rules = await self.deps.content.store.tenant_rules(tenant)
        return _view(tenant, None, tenant_policy(rules_from_json(stored_rules.rules) if stored_rules else {}),
                     stored_rules)

    async def set(self, caller: Caller, tenant_id: str, domain: str, rules: Mapping[str, str], *,
                  reset: bool = False) -> PolicyView:
        """Replaces the rules; no rules is a reset, said as such: a policy that went missing on its way
        (an unset field, an empty list) would otherwise drop every rule without a word."""
        if reset and rules:
            raise invalid("RESET_WITH_RULES", "a reset sets no rules; send the rules or the reset, not both")
        if not reset and not rules:
            raise invalid("CONTENT_POLICY_REQUIRED",
                          "a content policy needs at least one rule; to go back to the defaults, ask for a reset")
        tenant, domain_name = await self._target(caller, tenant_id, domain)
        checked = check_rules(rules)
        if domain_name:
            self._platform(caller)
            try:
                stored = await self.deps.content.store.set_domain_rules(domain_name, rules_to_json(checked), caller.key_id)
            except MissingParentError:
                raise not_found("domain") from None
            self.deps.content.forget_domain(domain_name)
            await self.deps.tenancy.audit(None, caller.key_id, "SetContentPolicy", f"domain:{domain_name}",
                                          {"rules": stored.rules})
            return _view(None, domain_name, domain_policy(checked), stored)
        assert tenant
        stored = await self.deps.content.store.set_tenant_rules(tenant, rules_to_json(checked), caller.key_id)
        self.deps.content.forget_tenant(tenant)
        await self.deps.tenancy.audit(tenant, caller.key_id, "SetContentPolicy", tenant, {"rules": stored.rules})
        return _view(tenant, None, tenant_policy(checked), stored)

    async def scan(self, caller: Caller, tenant_id: str, domain: str, rules: Mapping[str, str] | None) -> ScanReport:
        """What the given rules (the policy in force without them) would do to the stored memories:
        the tenant's, or a domain's (every member tenant's, platform admins only)."""
        tenant, domain_name = await self._target(caller, tenant_id, domain)
        proposed = check_rules(rules) if rules is not None else None
        if domain_name:
            self._platform(caller)
        report = ScanReport()
        after: uuid.UUID | None = None
        while True:
            texts = await self.deps.content.store.texts(tenant, domain_name, after, SCAN_BATCH)
            if not texts:
                return report
            pairs = [(text, await self._actions(text, domain_name, proposed)) for text in texts]
            screened = await self.deps.cpu.run(partial(_screen_all, pairs))
            for (text, _), one in zip(pairs, screened):
                report.add(str(text.id), one, text.tags)
            after = texts[-1].id

    async def _actions(self, text: StoredText, scanned_domain: str | None,
                       proposed: Mapping[str, Action] | None) -> Actions:
        current = await self.deps.content.actions(text.tenant_id, [text.domain] if text.domain else [])
        if proposed is None:
            return current
        if scanned_domain:
            return Actions(current.tenant, {scanned_domain: domain_policy(proposed)})
        return Actions(tenant_policy(proposed), current.domains)
