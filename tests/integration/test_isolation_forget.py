"""Isolation property (tests/support/isolation_machine.py) over every way memory is forgotten
(forgets and erasures stay within the caller's visibility):

    `services.forget` by filter, with and without the explicit `everything` flag (by id is a
    shared rule); `services.erasure`, the erasure of a user, in the call, dry or as an operation
    run by the worker's own code (`worker.runner.JobRunner`); and `services.lifecycle`, forgets
    by policy: SetLifecyclePolicy, GetLifecyclePolicy and RunLifecycle, dry or for real, now or
    a year on, by any caller of any tenant,

besides the shared rules (writes, updates, forgets by id, turn windows, no-result signals).
An erasure by a tenant admin reaches the user's memories (and signals) of every agent of its
tenant, any other writing key's what it may change; a lifecycle run reaches every global and
private memory of its tenant, and only a tenant admin of that tenant sets, reads or runs its
policy. Neither ever reaches another tenant, a domain memory it may not change, or another
tenant's policy (the snapshots compare them).

To see it fail, drop `m.tenant_id = $1` from `LifecycleStore.candidates`, or let
`services.erasure` take `tenant_wide` for any writer.
"""
from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import strategies as st

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.errors import Code
from memplane_server.core.forget.lifecycle import KindRule, LifecyclePolicy
from memplane_server.core.model import Kind, MemoryFilter, Scope
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.operations import OperationsService
from tests.support import isolation_inputs as inputs
from tests.support.isolation_inputs import Who
from tests.support.isolation_machine import SEEN, action, machine, run_machine
from tests.support.isolation_oracle import WRITING_ROLES, Op, Violation, can_change
from tests.support.isolation_snapshots import Reach
from tests.support.isolation_world import DIRECT, KEYED, USERS
from tests.support.jobs import run_only
from tests.support.services import erasure_service, lifecycle_service

ADMINS = [label for label, (role, *_) in {**DIRECT, **KEYED}.items() if role is Role.TENANT_ADMIN]
_EVERY_DAY = {k: KindRule(ttl_days=1) for k in Kind}
POLICIES = {
    "defaults": LifecyclePolicy(enabled=True),
    "ttl": LifecyclePolicy(enabled=True, rules=_EVERY_DAY),
    "ttl, hard": LifecyclePolicy(enabled=True, hard_delete=True, rules=_EVERY_DAY),
}
# None: the caller's own tenant (a tenant index alone would seldom draw it).
tenants = st.one_of(st.none(), st.integers(0, 3))
# Half of them tenant admins, who may set and run their own tenant's policy.
policy_callers = st.one_of(st.builds(Who, tenant=st.integers(0, 3), label=st.sampled_from(ADMINS)), inputs.callers)


class ForgetRules:
    @action(caller=inputs.callers, memory_filter=inputs.forget_filters, hard=st.booleans(), dry_run=st.booleans(),
            everything=st.booleans())
    async def forget_filter(self, caller: Caller, memory_filter: MemoryFilter, hard: bool, dry_run: bool,
                            everything: bool) -> None:
        expected = self.oracle.forgettable(caller, memory_filter, hard=hard)
        result, err = await self.mutate(
            "Forget(filter)", caller,
            ForgetService(self.deps).forget(caller, ids=None, f=memory_filter, hard=hard, dry_run=dry_run, reason="p",
                                            everything=everything),
            dry_run=dry_run,
        )
        if not memory_filter.narrows():
            SEEN["forget of everything" if everything else "forget of everything, not asked by name"] += 1
        if not memory_filter.narrows() and not everything and caller.role in WRITING_ROLES:
            self.check_error("Forget(filter)", caller, err, {Code.INVALID_ARGUMENT})
        else:
            self.check_forgotten("Forget(filter)", caller, result, err, expected)

    @action(caller=inputs.callers, user=st.sampled_from(USERS), dry_run=st.booleans(),
            mode=st.sampled_from(["sync", "auto", "async"]))
    async def erase_user(self, caller: Caller, user: str, dry_run: bool, mode: str) -> None:
        """Erasure of a user: a tenant admin reaches the user's memories of every agent of its tenant,
        any other writing key what it may change; never another tenant's (the same user id there is
        another person), never for a read-only key. Asked as an operation, the worker erases as much."""
        wide = caller.role is Role.TENANT_ADMIN
        expected = {m.id for m in self.oracle.mems.values()
                    if m.exists and m.tenant == caller.tenant_id and m.user == user and (wide or can_change(caller, m))}
        reach = Reach(lambda m: m.user == user) if wide else None
        what = f"Forget(erase_user_id, {mode})"
        audit_before = await self.audit_log()
        result, err = await self.mutate(
            what, caller, erasure_service(self.deps).erase(caller, user, mode=mode, dry_run=dry_run),
            dry_run=dry_run or mode == "async", reach=reach)
        if caller.role not in WRITING_ROLES:
            self.check_error(what, caller, err, {Code.PERMISSION_DENIED})
            return
        self.check_ok(what, caller, err)
        if result.operation is not None:
            SEEN["erasure as an operation"] += 1
            self.oracle.ops[result.operation.id] = Op(caller.tenant_id, caller.agent_id, "erase")
            await self.mutate(what + " run by the worker", caller, run_only(self.deps, result.operation.id),
                              reach=reach)
            view, err = await self.attempt(OperationsService(self.deps).get(caller, str(result.operation.id)))
            self.check_ok(what, caller, err)
            erased, counts = None, (view.result_receipt or {}).get("counts", {})
        else:
            erased, counts = set(result.ids), result.receipt.counts
        if (erased is not None and erased != expected) or counts.get("postgres.memories") != len(expected):
            describe, listed = self.names.describe, expected if erased is None else erased
            raise Violation(f"{what} by {self.names.who(caller)}: {counts.get('postgres.memories')} erased,"
                            f" expected {len(expected)}:"
                            f" extra {[describe(self.oracle.mems[i]) for i in listed - expected]},"
                            f" missing {[describe(self.oracle.mems[i]) for i in expected - listed]}")
        if not wide:
            # Only an admin reads, and so redacts, the audit log: another key's erasure leaves it
            # as it was, adds its own EraseUser entry at most, and its receipt names no audit rows.
            audit_after = await self.audit_log()
            added = [row for row in audit_after if row not in audit_before]
            if audit_after[:len(audit_before)] != audit_before or any(
                    (r["tenant_id"], r["action"]) != (caller.tenant_id, "EraseUser") for r in added):
                raise Violation(f"{what} by {self.names.who(caller)} changed the audit log")
            if "postgres.audit_events" in counts:
                raise Violation(f"{what} by {self.names.who(caller)}: its receipt counts audit rows")
            SEEN["erasures by a key that is no admin, audit log unchanged"] += 1

    async def audit_log(self) -> list:
        return [dict(r) for r in await self.deps.tenancy.pool.fetch(
            "SELECT id, tenant_id, actor_key_id, action, target, details::text AS details FROM audit_events"
            " WHERE tenant_id = ANY($1::text[]) ORDER BY id", self.world.tenants)]

    # -- forgets by policy

    def admin_of(self, caller: Caller, tenant: int | None) -> tuple[str, bool]:
        """The tenant a policy call names, and whether the caller may make it (its own tenant's admin)."""
        target = caller.tenant_id if tenant is None else self.world.tenant(tenant)
        return target, caller.role is Role.TENANT_ADMIN and caller.tenant_id == target

    @action(caller=policy_callers, tenant=tenants, policy=st.sampled_from(sorted(POLICIES)))
    async def set_lifecycle_policy(self, caller: Caller, tenant: int | None, policy: str) -> None:
        target, allowed = self.admin_of(caller, tenant)
        service = lifecycle_service(self.deps)
        _, err = await self.mutate("SetLifecyclePolicy", caller, service.set_policy(caller, target, POLICIES[policy]))
        got, read_err = await self.attempt(service.get_policy(caller, target))
        if not allowed:
            self.check_error("SetLifecyclePolicy", caller, err, {Code.PERMISSION_DENIED})
            self.check_error("GetLifecyclePolicy", caller, read_err, {Code.PERMISSION_DENIED})
            return
        self.check_ok("SetLifecyclePolicy", caller, err)
        self.check_ok("GetLifecyclePolicy", caller, read_err)
        if got[0] != POLICIES[policy].effective():
            raise Violation(f"GetLifecyclePolicy of {self.names.tenant(target)} after setting {policy}: {got[0]}")

    @action(caller=policy_callers, tenant=tenants, policy=st.one_of(st.none(), st.sampled_from(sorted(POLICIES))),
            dry_run=st.booleans(), later=st.booleans())
    async def run_lifecycle(self, caller: Caller, tenant: int | None, policy: str | None, dry_run: bool,
                            later: bool) -> None:
        """A run (now, or a year and more on, when every rule has something to do) changes and
        forgets its own tenant's global and private memories, every agent's, and nothing else."""
        target, allowed = self.admin_of(caller, tenant)
        if policy is not None and allowed:
            await self.set_lifecycle_policy(caller, tenant, policy)
        deps = self.deps
        if later:
            now = deps.clock() + timedelta(days=400)
            deps = replace(deps, clock=lambda: now)
        report, err = await self.mutate(
            "RunLifecycle", caller, lifecycle_service(deps).run(caller, target, dry_run=dry_run), dry_run=dry_run,
            reach=Reach(lambda m: m.scope is not Scope.DOMAIN) if allowed else None)
        if not allowed:
            self.check_error("RunLifecycle", caller, err, {Code.PERMISSION_DENIED})
            return
        self.check_ok("RunLifecycle", caller, err)
        for rule, ids in report.ids.items():
            SEEN[f"lifecycle {rule}"] += len(ids)
            for ident in ids:
                m = self.oracle.mems.get(ident)
                if m is None or m.tenant != target or m.scope is Scope.DOMAIN:
                    known = self.names.describe(m) if m else f"{ident}, a memory outside this world"
                    raise Violation(f"RunLifecycle of {self.names.tenant(target)}: rule {rule} chose {known}")


ForgetMachine = machine("ForgetMachine", ForgetRules)


def test_no_forget_erasure_or_policy_crosses_tenant_agent_or_domain(deps, session_loop):
    run_machine(ForgetMachine, deps, session_loop, examples=6, steps=50, min_calls=330)
