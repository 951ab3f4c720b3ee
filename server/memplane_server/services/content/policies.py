"""The content policies a write applies, read through a short cache, and the screening of a batch:
every write path (Write, working memory, extraction and reflection output, UpdateMemory, import)
passes its drafts here before anything is embedded or stored."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from opentelemetry import metrics

from ...core.access.caller import Caller
from ...core.content.policy import Actions, ContentPolicy, domain_policy, rules_from_json, tenant_policy
from ...core.content.screen import Screened, ScreenedTexts, refusal, screen, screen_texts
from ...core.model import MemoryDraft
from ...stores.postgres.content.policies import ContentPolicyStore

_findings = metrics.get_meter("memplane.server").create_counter(
    "memplane.content_policy.findings", unit="{finding}",
    description="what the content policy found in writes, by tenant, detector and the action taken")


class ContentPolicies:
    def __init__(self, store: ContentPolicyStore, cache_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.cache_seconds = cache_seconds
        self.clock = clock
        self._tenants: dict[str, tuple[float, ContentPolicy]] = {}
        self._domains: dict[str, tuple[float, ContentPolicy]] = {}

    def _fresh(self, cached: tuple[float, ContentPolicy] | None) -> ContentPolicy | None:
        if cached is None or self.clock() - cached[0] >= self.cache_seconds:
            return None
        return cached[1]

    async def tenant(self, tenant_id: str) -> ContentPolicy:
        policy = self._fresh(self._tenants.get(tenant_id))
        if policy is None:
            stored = await self.store.tenant_rules(tenant_id)
            policy = tenant_policy(rules_from_json(stored.rules) if stored else {})
            self._tenants[tenant_id] = (self.clock(), policy)
        return policy

    async def domains(self, names: Iterable[str]) -> dict[str, ContentPolicy]:
        found = {name: self._fresh(self._domains.get(name)) for name in set(names)}
        missing = [name for name, policy in found.items() if policy is None]
        if missing:
            stored = await self.store.domain_rules(missing)
            for name in missing:
                rules = stored.get(name)
                policy = domain_policy(rules_from_json(rules.rules) if rules else {})
                found[name] = policy
                self._domains[name] = (self.clock(), policy)
        return {name: policy for name, policy in found.items() if policy is not None}

    def forget_tenant(self, tenant_id: str) -> None:
        self._tenants.pop(tenant_id, None)

    def forget_domain(self, domain: str) -> None:
        self._domains.pop(domain, None)

    async def actions(self, tenant_id: str, domains: Iterable[str]) -> Actions:
        return Actions(await self.tenant(tenant_id), await self.domains(domains))

    async def screen(self, caller: Caller, drafts: list[MemoryDraft], *, derived: bool = False) -> list[MemoryDraft]:
        """The drafts as they may be stored (redacted, tagged), or CONTENT_POLICY naming the first
        refused item, detector and field; nothing of a refused batch is stored. derived: the server
        made these drafts (core/content/policy.Actions.derived)."""
        tenant = caller.require_tenant()
        actions = replace(await self.actions(tenant, {d.domain for d in drafts if d.domain}), derived=derived)
        # Regular expressions over up to a batch of long texts: off the event loop, as embedding is.
        screened = await asyncio.to_thread(lambda: [screen(d, actions) for d in drafts])
        count(tenant, screened)
        for index, one in enumerate(screened):
            if one.refused:
                raise refusal(one.refused, index)
        return [one.draft for one in screened]


    async def screen_texts(self, caller: Caller, texts: dict[str, str], domain: str | None) -> dict[str, str]:
        """Named texts a request carries besides memories (a task trajectory to reflect on), as
        they may be kept and read: redacted where the policy redacts, CONTENT_POLICY where it
        refuses (tags have no memory to go on)."""
        screened = await self._screened_texts(caller, texts, domain)
        if screened.refused:
            raise refusal(screened.refused)
        return screened.texts

    async def kept_texts(self, caller: Caller, texts: dict[str, str]) -> dict[str, str] | None:
        """Texts of a request the server keeps on its own account (a search's query, as a signal
        for reflection), as the tenant's policy lets them be kept: redacted where it redacts, None
        where it refuses. Such a text is then simply not kept; the request itself goes on."""
        screened = await self._screened_texts(caller, texts, None)
        return None if screened.refused else screened.texts

    async def _screened_texts(self, caller: Caller, texts: dict[str, str], domain: str | None) -> ScreenedTexts:
        tenant = caller.require_tenant()
        actions = await self.actions(tenant, [domain] if domain else [])
        screened = await asyncio.to_thread(screen_texts, texts, actions, domain)
        for hit in screened.hits:
            _findings.add(1, {"tenant": tenant, "detector": hit.detector, "action": hit.action.value})
        return screened


def count(tenant: str, screened: Iterable[Screened]) -> None:
    for one in screened:
        for hit in one.hits:
            _findings.add(1, {"tenant": tenant, "detector": hit.detector, "action": hit.action.value})

