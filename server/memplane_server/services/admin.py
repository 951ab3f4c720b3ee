"""Admin: tenants, agents, API keys, domains and grants, every change written to the audit log."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from ..core.access.caller import Caller, Role
from ..core.access.keys import is_key_id, new_key
from ..core.access.tenancy import Agent, ApiKey, AuditEvent, Domain, DomainGrant, Tenant
from ..core.errors import Code, MemplaneError, denied, invalid, not_found
from ..core.paging import decode_position, encode_token
from ..core.validation import MAX_NAME_BYTES, MAX_NOTE_BYTES, check_identifier, check_text, clamp_page_size
from ..stores.postgres.tenancy import DuplicateError, MissingParentError, TenancyStore


def _exists(what: str) -> MemplaneError:
    return MemplaneError(Code.ALREADY_EXISTS, f"{what.upper()}_EXISTS", f"{what} already exists")


T = TypeVar("T")


def _page(rows: Sequence[T], size: int, key: str) -> tuple[list[T], str]:
    """The first size of rows (one more was read to learn whether a next page exists) and the
    token of that next page: the key attribute of the last row shown."""
    page = list(rows[:size])
    return page, encode_token([getattr(page[-1], key)]) if len(rows) > size else ""


def _after(token: str, kind: str = "text") -> Any:
    """The id (or, for the audit log, the sequence number) a page starts after."""
    position = decode_position(token, kind)
    return position[0] if position else None


def _tenant_id(tenant_id: str | None) -> str | None:
    """An optional tenant id of a read: checked so a malformed one never reaches a query."""
    return check_identifier(tenant_id, "tenant") if tenant_id else None


async def administered_tenant(tenancy: TenancyStore, caller: Caller, tenant_id: str) -> str:
    """The existing tenant a tenant-scoped admin call (a policy's) is about: the caller's own by
    default, reached by its own tenant admin or any platform admin."""
    tenant = tenant_id or caller.tenant_id or ""
    own = caller.role is Role.TENANT_ADMIN and caller.tenant_id == tenant
    if caller.role is not Role.PLATFORM_ADMIN and not own:
        raise denied("TENANT_ADMIN_REQUIRED", "this call needs an admin key of that tenant")
    check_identifier(tenant, "tenant")
    if await tenancy.get_tenant(tenant) is None:
        raise not_found("tenant")
    return tenant


class AdminService:
    def __init__(self, tenancy: TenancyStore) -> None:
        self.store = tenancy

    @staticmethod
    def _platform(caller: Caller) -> None:
        if caller.role is not Role.PLATFORM_ADMIN:
            raise denied("PLATFORM_ADMIN_REQUIRED", "this call needs a platform admin key")

    @staticmethod
    def _tenant_admin(caller: Caller, tenant_id: str) -> None:
        if caller.role is Role.PLATFORM_ADMIN:
            return
        if caller.role is not Role.TENANT_ADMIN or caller.tenant_id != tenant_id:
            raise denied("TENANT_ADMIN_REQUIRED", "this call needs an admin key of that tenant")

    async def _audit(self, caller: Caller, tenant: str | None, action: str, target: str, details: dict | None = None) -> None:
        await self.store.audit(tenant, caller.key_id, action, target, details or {})

    async def create_tenant(
        self, caller: Caller, tenant_id: str, display_name: str, max_memories: int, with_admin_key: bool
    ) -> tuple[Tenant, ApiKey | None, str]:
        self._platform(caller)
        check_identifier(tenant_id, "tenant")
        check_text(display_name, "display_name", MAX_NAME_BYTES)
        if max_memories < 0:
            raise invalid("INVALID_MAX_MEMORIES", "max_memories must not be negative")
        try:
            tenant = await self.store.create_tenant(tenant_id, display_name, max_memories)
        except DuplicateError:
            raise _exists("tenant") from None
        await self._audit(caller, tenant_id, "CreateTenant", tenant_id)
        key, secret = None, ""
        if with_admin_key:
            key, secret = await self._new_key(caller, tenant_id, None, Role.TENANT_ADMIN, "tenant admin")
        return tenant, key, secret

    async def get_tenant(self, caller: Caller, tenant_id: str) -> Tenant:
        self._tenant_admin(caller, tenant_id)
        check_identifier(tenant_id, "tenant")
        tenant = await self.store.get_tenant(tenant_id)
        if tenant is None:
            raise not_found("tenant")
        return tenant

    async def list_tenants(self, caller: Caller, page_size: int, token: str) -> tuple[list[Tenant], str]:
        self._platform(caller)
        size = clamp_page_size(page_size)
        return _page(await self.store.list_tenants(_after(token), size + 1), size, "id")

    async def create_agent(self, caller: Caller, tenant_id: str, agent_id: str, display_name: str) -> Agent:
        self._tenant_admin(caller, tenant_id)
        check_identifier(tenant_id, "tenant")
        check_identifier(agent_id, "agent")
        check_text(display_name, "display_name", MAX_NAME_BYTES)
        try:
            agent = await self.store.create_agent(tenant_id, agent_id, display_name)
        except DuplicateError:
            raise _exists("agent") from None
        except MissingParentError:
            raise not_found("tenant") from None
        await self._audit(caller, tenant_id, "CreateAgent", agent_id)
        return agent

    async def list_agents(self, caller: Caller, tenant_id: str, page_size: int, token: str) -> tuple[list[Agent], str]:
        self._tenant_admin(caller, tenant_id)
        check_identifier(tenant_id, "tenant")
        size = clamp_page_size(page_size)
        return _page(await self.store.list_agents(tenant_id, _after(token), size + 1), size, "id")

    async def _new_key(
        self, caller: Caller, tenant_id: str | None, agent_id: str | None, role: Role, name: str
    ) -> tuple[ApiKey, str]:
        key_id, secret, digest = new_key()
        try:
            key = await self.store.create_key(key_id, tenant_id, agent_id, role, digest, name)
        except MissingParentError:
            raise not_found("agent" if agent_id else "tenant") from None
        await self._audit(caller, tenant_id, "CreateApiKey", key_id, {"role": role.value, "agent_id": agent_id})
        return key, secret

    async def create_api_key(
        self, caller: Caller, tenant_id: str | None, agent_id: str | None, role: Role | None, name: str
    ) -> tuple[ApiKey, str]:
        if role is None:
            raise invalid("ROLE_REQUIRED", "role is required")
        check_text(name, "display_name", MAX_NAME_BYTES)
        if role is Role.PLATFORM_ADMIN:
            self._platform(caller)
            if tenant_id or agent_id:
                raise invalid("PLATFORM_KEY_HAS_NO_TENANT", "platform admin keys take no tenant or agent")
            return await self._new_key(caller, None, None, role, name)
        if not tenant_id:
            raise invalid("TENANT_REQUIRED", "tenant_id is required")
        self._tenant_admin(caller, tenant_id)
        check_identifier(tenant_id, "tenant")
        if (role is Role.AGENT) != bool(agent_id):
            raise invalid("AGENT_ROLE_MISMATCH", "agent_id is required for ROLE_AGENT and only for it")
        if agent_id:
            check_identifier(agent_id, "agent")
        return await self._new_key(caller, tenant_id, agent_id or None, role, name)

    async def list_api_keys(
        self, caller: Caller, tenant_id: str | None, page_size: int, token: str
    ) -> tuple[list[ApiKey], str]:
        if tenant_id:
            self._tenant_admin(caller, tenant_id)
        else:
            self._platform(caller)
        size = clamp_page_size(page_size)
        return _page(await self.store.list_keys(_tenant_id(tenant_id), _after(token), size + 1), size, "id")

    async def revoke_api_key(self, caller: Caller, key_id: str) -> ApiKey:
        if not is_key_id(key_id):
            raise not_found("api_key")  # as unknown as an id that does not exist
        key = await self.store.get_key(key_id)
        if key is None or (caller.role is not Role.PLATFORM_ADMIN and key.tenant_id != caller.tenant_id):
            raise not_found("api_key")
        if key.tenant_id is None:
            self._platform(caller)
        else:
            self._tenant_admin(caller, key.tenant_id)
        revoked = await self.store.revoke_key(key_id)
        if revoked is None:  # deleted since it was read
            raise not_found("api_key")
        await self._audit(caller, key.tenant_id, "RevokeApiKey", key_id)
        return revoked

    async def create_domain(self, caller: Caller, name: str, description: str) -> Domain:
        self._platform(caller)
        check_identifier(name, "domain")
        check_text(description, "description", MAX_NOTE_BYTES)
        try:
            created = await self.store.create_domain(name, description)
        except DuplicateError:
            raise _exists("domain") from None
        await self._audit(caller, None, "CreateDomain", name)
        return created

    async def list_domains(self, caller: Caller, page_size: int, token: str) -> tuple[list[Domain], str]:
        size = clamp_page_size(page_size)
        domains = await self.store.list_domains(_after(token), size + 1)
        if caller.role is not Role.PLATFORM_ADMIN:
            # A tenant learns only the domains it is a member of.
            domains = [d for d in domains if d.name in caller.domains]
        return _page(domains, size, "name")

    async def grant_domain(self, caller: Caller, domain: str, tenant_id: str, can_write: bool | None) -> DomainGrant:
        self._platform(caller)
        if can_write is None:
            raise invalid("ACCESS_REQUIRED", "access is required")
        check_identifier(domain, "domain")
        check_identifier(tenant_id, "tenant")
        try:
            grant = await self.store.grant(domain, tenant_id, can_write)
        except MissingParentError:
            raise not_found("domain_or_tenant") from None
        await self._audit(caller, tenant_id, "GrantDomain", domain, {"can_write": can_write})
        return grant

    async def revoke_domain_grant(self, caller: Caller, domain: str, tenant_id: str) -> None:
        self._platform(caller)
        check_identifier(domain, "domain")
        check_identifier(tenant_id, "tenant")
        if not await self.store.revoke_grant(domain, tenant_id):
            raise not_found("grant")
        await self._audit(caller, tenant_id, "RevokeDomainGrant", domain)

    async def list_domain_grants(self, caller: Caller, domain: str | None, tenant_id: str | None) -> list[DomainGrant]:
        if caller.role is not Role.PLATFORM_ADMIN:
            self._tenant_admin(caller, tenant_id or "")
        domain = check_identifier(domain, "domain") if domain else None
        return await self.store.list_grants(domain, _tenant_id(tenant_id))

    async def list_audit_events(
        self, caller: Caller, tenant_id: str | None, page_size: int, token: str
    ) -> tuple[list[AuditEvent], str]:
        if caller.role is not Role.PLATFORM_ADMIN:
            self._tenant_admin(caller, tenant_id or "")
        size = clamp_page_size(page_size)
        return _page(await self.store.list_audit(_tenant_id(tenant_id), _after(token, "int"), size + 1), size, "id")

    async def bootstrap(self, tenant_id: str) -> tuple[str, str] | None:
        """On an empty database: the first tenant with an admin key, and a platform admin key.

        Returns (platform admin secret, tenant admin secret) once; None when already set up.
        """
        async with self.store.bootstrap_turn() as empty:
            if not empty:
                return None
            system = Caller(key_id="bootstrap", role=Role.PLATFORM_ADMIN, tenant_id=None, agent_id=None)
            _, platform_secret = await self._new_key(system, None, None, Role.PLATFORM_ADMIN, "bootstrap platform admin")
            _, _, tenant_secret = await self.create_tenant(system, tenant_id, tenant_id, 0, True)
            return platform_secret, tenant_secret
