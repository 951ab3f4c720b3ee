"""Lifecycle policies: set and read by tenant admins (and platform admins), run by the scheduled
'lifecycle' job or on request, dry or for real. The rules are core/forget/lifecycle.py; removals go through
ForgetService (cascades, copies, history, audit, change stream), in-place changes through
LifecycleStore.change (history, change stream). A dry run reports what the run would do, computed
by the same plan."""
from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import datetime

from ...core.access.caller import Caller, Role
from ...core.forget.lifecycle import (
    REMOVAL_RULES,
    Candidate,
    LifecyclePolicy,
    LifecycleReport,
    check_policy,
    plan,
    policy_from_json,
    policy_to_json,
    report_to_json,
)
from ...core.model import Scope
from ...stores.postgres.forget.lifecycle import LifecycleStore, StoredPolicy
from ..admin import administered_tenant
from .deps import ForgetDeps
from .service import ForgetService

BATCH = 2000
ACTOR = "system:lifecycle"


class LifecycleService:
    def __init__(self, deps: ForgetDeps, store: LifecycleStore, forgets: ForgetService) -> None:
        self.deps = deps
        self.store = store
        self.forgets = forgets

    async def _admin_of(self, caller: Caller, tenant_id: str) -> str:
        return await administered_tenant(self.deps.tenancy, caller, tenant_id)

    async def get_policy(self, caller: Caller, tenant_id: str) -> tuple[LifecyclePolicy, StoredPolicy | None]:
        """The tenant's policy with every kind spelled out, and its stored row (None: the defaults,
        not enabled)."""
        return await self._policy(await self._admin_of(caller, tenant_id))

    async def _policy(self, tenant: str) -> tuple[LifecyclePolicy, StoredPolicy | None]:
        stored = await self.store.get_policy(tenant)
        if stored is None:
            return LifecyclePolicy().effective(), None
        return policy_from_json(stored.enabled, stored.policy).effective(), stored

    async def set_policy(self, caller: Caller, tenant_id: str, policy: LifecyclePolicy) -> LifecyclePolicy:
        tenant = await self._admin_of(caller, tenant_id)
        check_policy(policy)
        stored = await self.store.set_policy(tenant, policy.enabled, policy_to_json(policy.effective()), caller.key_id)
        await self.deps.tenancy.audit(tenant, caller.key_id, "SetLifecyclePolicy", tenant,
                                      {"enabled": stored.enabled, "policy": stored.policy})
        return policy_from_json(stored.enabled, stored.policy)

    async def run(self, caller: Caller, tenant_id: str, *, dry_run: bool) -> LifecycleReport:
        """Runs the tenant's policy now (the defaults when none was set), enabled or not."""
        return await self.run_for(await self._admin_of(caller, tenant_id), dry_run=dry_run, actor=caller.key_id)

    async def run_for(self, tenant: str, *, dry_run: bool, now: datetime | None = None,
                      actor: str = ACTOR) -> LifecycleReport:
        now = now or self.deps.clock()
        policy, _ = await self._policy(tenant)
        report = LifecycleReport(tenant, now, dry_run)
        decided: dict[str, list[Candidate]] = defaultdict(list)
        after = None
        while batch := await self.store.candidates(tenant, after, BATCH):
            # Rules over a batch: CPU work, off the event loop.
            for rule, chosen in (await asyncio.to_thread(plan, batch, policy, now, report)).items():
                decided[rule].extend(chosen)
            after = batch[-1].id
        if dry_run:
            return report
        for rule in REMOVAL_RULES:
            await self._remove(tenant, decided[rule], hard=policy.hard_delete, reason=f"lifecycle policy: {rule}")
        for rule in ("archive", "review", "unflag", "restore"):
            await self.store.change(tenant, [c.id for c in decided[rule]], rule, now=now, actor=actor,
                                    reason=f"lifecycle policy: {rule}")
        by_weight: dict[float, list[Candidate]] = defaultdict(list)
        for c in decided["demote"]:
            by_weight[policy.rule(c.kind).demote_weight].append(c)
        for weight, chosen in by_weight.items():
            await self.store.change(tenant, [c.id for c in chosen], "demote", now=now, weight=weight, actor=actor,
                                    reason=f"lifecycle policy: demote to weight {weight:g}")
        if any(report.counts.values()):
            details = report_to_json(report)
            details["ids"] = {rule: ids[:100] for rule, ids in details["ids"].items() if ids}
            await self.deps.tenancy.audit(tenant, actor, "Lifecycle", tenant, details)
        return report

    async def _remove(self, tenant: str, chosen: list[Candidate], *, hard: bool, reason: str) -> None:
        """Forgets, as the owner of each memory (a global one: the tenant; a private one: its agent)."""
        by_owner: dict[str | None, list[Candidate]] = defaultdict(list)
        for c in chosen:
            by_owner[c.agent_id if c.scope is Scope.PRIVATE else None].append(c)
        size = self.deps.settings.max_batch
        for agent, owned in by_owner.items():
            caller = Caller(key_id=ACTOR, role=Role.WRITER, tenant_id=tenant, agent_id=agent)
            for start in range(0, len(owned), size):
                ids = [c.id for c in owned[start:start + size]]
                # What an earlier forget of this run took with it (a derived memory erased) is not asked for.
                present = [str(r.id) for r in await self.deps.memories.get_many(caller, ids)]
                if present:
                    await self.forgets.forget(caller, ids=present, f=None, hard=hard, dry_run=False, reason=reason)
