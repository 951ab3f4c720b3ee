"""Isolation property (tests/support/isolation_machine.py) over time: access that ends while a
stream is open or a job waits, besides the shared rules (writes, updates, forgets, windows):

  - a Watch of a key revoked while it is open ends UNAUTHENTICATED, and nothing written after the
    revocation reaches it;
  - a Watch reading a domain through a grant that is removed while it is open ends
    PERMISSION_DENIED DOMAIN_GRANT_REMOVED, and nothing of the domain written after reaches it
    (the grant is given back afterwards, so the rest of the world is as it was);
  - a job queued by a key revoked before it runs fails with API_KEY_REVOKED and changes nothing.

To see it fail, make `services.watch.WatchService._watch`'s recheck a no-op, or have
`worker.runner.JobRunner._run` use the queued caller as it is.
"""
from __future__ import annotations

import asyncio
import uuid

from hypothesis import strategies as st

from memplane_server.core.access.caller import Caller, Role, caller_to_json
from memplane_server.core.changes import ChangeFilter
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, MemoryDraft, Scope
from memplane_server.services.admin import AdminService
from memplane_server.services.operations import OperationsService
from memplane_server.services.watch.service import WatchService
from tests.integration.conftest import PLATFORM
from tests.support.isolation_machine import SEEN, action, machine, run_machine
from tests.support.isolation_oracle import Violation
from tests.support.jobs import run_only

ENDS_WITHIN = 5.0  # seconds: the promise is 2 s; a shared CI machine gets slack


def _note(content: str, scope: Scope | None = None, domain: str | None = None) -> MemoryDraft:
    return MemoryDraft(scope=scope, domain=domain, agent_id=None, layer=None, kind=Kind.EVENT, content=content)


class TimeRules:
    async def _fresh_key(self, tenant: str, role: Role) -> tuple[str, str | None]:
        agent = "a1" if role is Role.AGENT else None
        row, secret = await AdminService(self.deps.tenancy).create_api_key(PLATFORM, tenant, agent, role, "fleeting")
        return secret, row.id

    async def _watch_until_it_ends(self, stream, after_write, what: str, caller_name: str) -> tuple[list, MemplaneError]:
        """Reads the open stream, runs after_write() (the change that must not arrive), then reads
        until the stream ends; returns the events it sent after the write and how it ended."""
        await self.attempt(anext(stream))
        marker = await after_write()
        sent = []
        deadline = asyncio.get_running_loop().time() + ENDS_WITHIN
        try:
            while True:
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    raise Violation(f"{what}: the Watch of {caller_name} was still open {ENDS_WITHIN} s later")
                try:
                    batch = await asyncio.wait_for(anext(stream), left)
                except asyncio.TimeoutError:
                    continue
                sent += [e for e in batch.events if e.memory_id == marker]
        except MemplaneError as err:
            return sent, err
        finally:
            await stream.aclose()

    @action(tenant=st.integers(0, 3), role=st.sampled_from([Role.READER, Role.WRITER, Role.AGENT]))
    async def revoke_during_watch(self, tenant: int, role: Role) -> None:
        t = self.world.tenant(tenant)
        secret, key_id = await self._fresh_key(t, role)
        caller = await self.world.auth.resolve(secret, None)
        stream = WatchService(self.deps).watch(
            caller, ChangeFilter(), None, reauthorize=lambda age: self.world.auth.resolve(secret, None, max_age=age))
        writer = self.world.direct[(t, "writer")]

        async def revoke_then_write():
            await AdminService(self.deps.tenancy).revoke_api_key(PLATFORM, key_id)
            records, err = await self.write_between_snapshots("Write(after a revocation)", writer,
                                                              [_note(f"after revoking {uuid.uuid4().hex[:6]}")])
            self.check_ok("Write(after a revocation)", writer, err)
            return records[0].id

        sent, err = await self._watch_until_it_ends(stream, revoke_then_write, "revoke_during_watch",
                                                    self.names.who(caller))
        if err.code is not Code.UNAUTHENTICATED:
            raise Violation(f"a revoked key's Watch ended with {err.code} {err.reason}, not UNAUTHENTICATED")
        if sent:
            raise Violation(f"a revoked key's Watch ({role.value}) received a memory written after the revocation")
        SEEN["watches ended by a revocation"] += 1

    @action(tenant=st.integers(0, 3), domain=st.integers(0, 1))
    async def remove_grant_during_watch(self, tenant: int, domain: int) -> None:
        t, d = self.world.tenant(tenant), self.world.domain(domain)
        can_write = self.world.grants[t].get(d)
        author = next((x for x in self.world.tenants if x != t and self.world.grants[x].get(d)), None)
        if can_write is None or author is None:
            return  # not a member, or no other member writes there
        secret = self.world.keys[(t, "key:writer")].secret
        caller = await self.world.auth.resolve(secret, None, max_age=0.0)
        stream = WatchService(self.deps).watch(
            caller, ChangeFilter(scopes=(Scope.DOMAIN,)), None,
            reauthorize=lambda age: self.world.auth.resolve(secret, None, max_age=age))
        admin = AdminService(self.deps.tenancy)
        writer = self.world.direct[(author, "writer")]

        async def remove_then_write():
            await admin.revoke_domain_grant(PLATFORM, d, t)
            records, err = await self.write_between_snapshots(
                "Write(after a grant's removal)", writer, [_note("shared after the removal", Scope.DOMAIN, d)])
            self.check_ok("Write(after a grant's removal)", writer, err)
            return records[0].id

        try:
            sent, err = await self._watch_until_it_ends(stream, remove_then_write, "remove_grant_during_watch",
                                                        self.names.who(caller))
        finally:
            await admin.grant_domain(PLATFORM, d, t, can_write)
            self.world.auth._cache.clear()  # the world's keyed callers resolve with the grant again
        if (err.code, err.reason) != (Code.PERMISSION_DENIED, "DOMAIN_GRANT_REMOVED"):
            raise Violation(f"a Watch whose grant was removed ended with {err.code} {err.reason}")
        if sent:
            raise Violation("a Watch received a domain memory written after its tenant's grant was removed")
        SEEN["watches ended by a removed grant"] += 1

    @action(tenant=st.integers(0, 3), role=st.sampled_from([Role.WRITER, Role.AGENT, Role.TENANT_ADMIN]))
    async def revoke_before_job(self, tenant: int, role: Role) -> None:
        t = self.world.tenant(tenant)
        secret, key_id = await self._fresh_key(t, role)
        caller: Caller = await self.world.auth.resolve(secret, None)
        user = f"nobody-{uuid.uuid4().hex[:6]}"
        op = await self.deps.jobs.enqueue(caller, "erase", {"user_id": user, "reason": ""}, caller_to_json(caller))
        await AdminService(self.deps.tenancy).revoke_api_key(PLATFORM, key_id)
        _, err = await self.mutate("an erasure queued by a key revoked before it ran", caller, run_only(self.deps, op.id))
        self.check_ok("running the job", caller, err)
        view = await OperationsService(self.deps).get(self.world.direct[(t, "admin")], str(op.id))
        if (view.state, view.error_reason) != ("failed", "API_KEY_REVOKED"):
            raise Violation(f"a job of a key revoked before it ran ended {view.state} {view.error_reason}")
        SEEN["jobs failed for a revoked key"] += 1


TimeMachine = machine("TimeMachine", TimeRules)


def test_no_access_outlives_its_revocation_or_grant(deps, session_loop):
    run_machine(TimeMachine, deps, session_loop, examples=3, steps=25, min_calls=60)
