"""Caller: the visibility rule (can_read), write-scope checks and the default scope."""
from __future__ import annotations

from datetime import datetime, timezone
from uuid import uuid4

import pytest

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, Layer, MemoryRecord, Scope, Status


def memory(scope: Scope, *, tenant: str = "acme", domain: str | None = None, agent: str | None = None) -> MemoryRecord:
    now = datetime(2024, 1, 1, tzinfo=timezone.utc)
    return MemoryRecord(
        id=uuid4(), tenant_id=tenant, scope=scope, domain=domain, agent_id=agent, user_id=None, session_id=None,
        layer=Layer.SEMANTIC, kind=Kind.FACT, content="x", context="", entity=None, attribute=None, value=None,
        tags=[], metadata={}, confidence=1.0, status=Status.ACTIVE, supersedes=None, source_type=None,
        source_id=None, occurred_at=now, valid_from=None, valid_to=None, created_at=now, updated_at=now,
    )


def caller(role: Role = Role.WRITER, *, tenant: str | None = "acme", agent: str | None = None,
           domains: dict[str, bool] | None = None) -> Caller:
    return Caller(key_id="k1", role=role, tenant_id=tenant, agent_id=agent, domains=domains or {})


# --- can_read ---------------------------------------------------------------------------

def test_global_memory_of_own_tenant_is_readable():
    assert caller().can_read(memory(Scope.GLOBAL, tenant="acme"))


def test_global_memory_of_other_tenant_is_not_readable():
    assert not caller().can_read(memory(Scope.GLOBAL, tenant="globex"))


def test_domain_memory_with_grant_is_readable():
    assert caller(domains={"travel": False}).can_read(memory(Scope.DOMAIN, domain="travel"))


def test_domain_memory_with_grant_is_readable_across_tenants():
    # Domains are shared between tenants: the grant, not the writer's tenant, decides.
    assert caller(domains={"travel": False}).can_read(memory(Scope.DOMAIN, tenant="globex", domain="travel"))


def test_domain_memory_without_grant_is_not_readable():
    assert not caller(domains={"finance": True}).can_read(memory(Scope.DOMAIN, domain="travel"))


def test_domain_memory_is_not_readable_by_caller_without_any_grant():
    assert not caller().can_read(memory(Scope.DOMAIN, domain="travel"))


def test_private_memory_of_same_agent_is_readable():
    assert caller(agent="bot").can_read(memory(Scope.PRIVATE, agent="bot"))


def test_private_memory_of_other_agent_is_not_readable():
    assert not caller(agent="bot").can_read(memory(Scope.PRIVATE, agent="other"))


def test_private_memory_is_not_readable_without_an_agent():
    assert not caller(agent=None).can_read(memory(Scope.PRIVATE, agent="bot"))


def test_private_memory_of_other_tenant_with_same_agent_name_is_not_readable():
    assert not caller(agent="bot").can_read(memory(Scope.PRIVATE, tenant="globex", agent="bot"))


def test_readable_domains_are_sorted_names_of_all_grants():
    assert caller(domains={"b": True, "a": False}).readable_domains == ["a", "b"]


# --- check_write_scope ------------------------------------------------------------------

def _denied(fn, *args) -> MemplaneError:
    with pytest.raises(MemplaneError) as exc:
        fn(*args)
    return exc.value


def test_reader_key_may_not_write():
    err = _denied(caller(Role.READER).check_write_scope, Scope.GLOBAL, None)
    assert (err.code, err.reason) == (Code.PERMISSION_DENIED, "READ_ONLY_KEY")


def test_platform_admin_without_tenant_needs_a_tenant_key():
    err = _denied(caller(Role.PLATFORM_ADMIN, tenant=None).check_write_scope, Scope.GLOBAL, None)
    assert (err.code, err.reason) == (Code.PERMISSION_DENIED, "TENANT_KEY_REQUIRED")


def test_agent_key_may_not_write_global():
    err = _denied(caller(Role.AGENT, agent="bot").check_write_scope, Scope.GLOBAL, None)
    assert (err.code, err.reason) == (Code.PERMISSION_DENIED, "GLOBAL_WRITE_DENIED")


@pytest.mark.parametrize("role", [Role.WRITER, Role.TENANT_ADMIN])
def test_writer_and_tenant_admin_may_write_global(role):
    caller(role).check_write_scope(Scope.GLOBAL, None)


def test_private_write_without_agent_needs_an_agent():
    err = _denied(caller(Role.WRITER).check_write_scope, Scope.PRIVATE, None)
    assert (err.code, err.reason) == (Code.INVALID_ARGUMENT, "AGENT_REQUIRED")


def test_private_write_with_agent_is_allowed():
    caller(Role.AGENT, agent="bot").check_write_scope(Scope.PRIVATE, None)


def test_domain_write_without_domain_name_needs_a_domain():
    err = _denied(caller(domains={"travel": True}).check_write_scope, Scope.DOMAIN, None)
    assert (err.code, err.reason) == (Code.INVALID_ARGUMENT, "DOMAIN_REQUIRED")


def test_domain_write_without_grant_is_denied():
    err = _denied(caller(domains={"finance": True}).check_write_scope, Scope.DOMAIN, "travel")
    assert (err.code, err.reason) == (Code.PERMISSION_DENIED, "DOMAIN_WRITE_DENIED")


def test_domain_write_with_read_only_grant_is_denied():
    err = _denied(caller(domains={"travel": False}).check_write_scope, Scope.DOMAIN, "travel")
    assert (err.code, err.reason) == (Code.PERMISSION_DENIED, "DOMAIN_WRITE_DENIED")


def test_domain_write_with_read_write_grant_is_allowed():
    caller(domains={"travel": True}).check_write_scope(Scope.DOMAIN, "travel")


def test_agent_key_may_write_domain_with_read_write_grant():
    caller(Role.AGENT, agent="bot", domains={"travel": True}).check_write_scope(Scope.DOMAIN, "travel")


# --- default_scope ----------------------------------------------------------------------

def test_default_scope_with_agent_is_private():
    assert caller(agent="bot").default_scope() is Scope.PRIVATE


def test_default_scope_without_agent_is_global():
    assert caller(agent=None).default_scope() is Scope.GLOBAL
