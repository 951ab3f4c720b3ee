import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from memplane.v1 import memory_pb2 as _memory_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_PLATFORM_ADMIN: _ClassVar[Role]
    ROLE_TENANT_ADMIN: _ClassVar[Role]
    ROLE_WRITER: _ClassVar[Role]
    ROLE_READER: _ClassVar[Role]
    ROLE_AGENT: _ClassVar[Role]

class DomainAccess(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DOMAIN_ACCESS_UNSPECIFIED: _ClassVar[DomainAccess]
    DOMAIN_ACCESS_READ: _ClassVar[DomainAccess]
    DOMAIN_ACCESS_READ_WRITE: _ClassVar[DomainAccess]

class ContentAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONTENT_ACTION_UNSPECIFIED: _ClassVar[ContentAction]
    CONTENT_ACTION_OFF: _ClassVar[ContentAction]
    CONTENT_ACTION_TAG: _ClassVar[ContentAction]
    CONTENT_ACTION_REDACT: _ClassVar[ContentAction]
    CONTENT_ACTION_REFUSE: _ClassVar[ContentAction]
ROLE_UNSPECIFIED: Role
ROLE_PLATFORM_ADMIN: Role
ROLE_TENANT_ADMIN: Role
ROLE_WRITER: Role
ROLE_READER: Role
ROLE_AGENT: Role
DOMAIN_ACCESS_UNSPECIFIED: DomainAccess
DOMAIN_ACCESS_READ: DomainAccess
DOMAIN_ACCESS_READ_WRITE: DomainAccess
CONTENT_ACTION_UNSPECIFIED: ContentAction
CONTENT_ACTION_OFF: ContentAction
CONTENT_ACTION_TAG: ContentAction
CONTENT_ACTION_REDACT: ContentAction
CONTENT_ACTION_REFUSE: ContentAction

class Tenant(_message.Message):
    __slots__ = ("id", "display_name", "create_time", "max_memories")
    ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    MAX_MEMORIES_FIELD_NUMBER: _ClassVar[int]
    id: str
    display_name: str
    create_time: _timestamp_pb2.Timestamp
    max_memories: int
    def __init__(self, id: _Optional[str] = ..., display_name: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., max_memories: _Optional[int] = ...) -> None: ...

class Agent(_message.Message):
    __slots__ = ("tenant_id", "id", "display_name", "create_time")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    id: str
    display_name: str
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, tenant_id: _Optional[str] = ..., id: _Optional[str] = ..., display_name: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ApiKey(_message.Message):
    __slots__ = ("id", "tenant_id", "agent_id", "role", "display_name", "create_time", "revoke_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    REVOKE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    agent_id: str
    role: Role
    display_name: str
    create_time: _timestamp_pb2.Timestamp
    revoke_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., display_name: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoke_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Domain(_message.Message):
    __slots__ = ("name", "description", "create_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DomainGrant(_message.Message):
    __slots__ = ("domain", "tenant_id", "access", "create_time")
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    domain: str
    tenant_id: str
    access: DomainAccess
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, domain: _Optional[str] = ..., tenant_id: _Optional[str] = ..., access: _Optional[_Union[DomainAccess, str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AuditEvent(_message.Message):
    __slots__ = ("id", "tenant_id", "actor_key_id", "action", "target", "details_json", "event_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    DETAILS_JSON_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    actor_key_id: str
    action: str
    target: str
    details_json: str
    event_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., actor_key_id: _Optional[str] = ..., action: _Optional[str] = ..., target: _Optional[str] = ..., details_json: _Optional[str] = ..., event_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateTenantRequest(_message.Message):
    __slots__ = ("tenant", "create_admin_key")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    CREATE_ADMIN_KEY_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    create_admin_key: bool
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ..., create_admin_key: _Optional[bool] = ...) -> None: ...

class CreateTenantResponse(_message.Message):
    __slots__ = ("tenant", "admin_key", "admin_key_secret")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ADMIN_KEY_FIELD_NUMBER: _ClassVar[int]
    ADMIN_KEY_SECRET_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    admin_key: ApiKey
    admin_key_secret: str
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ..., admin_key: _Optional[_Union[ApiKey, _Mapping]] = ..., admin_key_secret: _Optional[str] = ...) -> None: ...

class GetTenantRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetTenantResponse(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ...) -> None: ...

class ListTenantsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTenantsResponse(_message.Message):
    __slots__ = ("tenants", "next_page_token")
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenants: _containers.RepeatedCompositeFieldContainer[Tenant]
    next_page_token: str
    def __init__(self, tenants: _Optional[_Iterable[_Union[Tenant, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CreateAgentRequest(_message.Message):
    __slots__ = ("agent",)
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: Agent
    def __init__(self, agent: _Optional[_Union[Agent, _Mapping]] = ...) -> None: ...

class CreateAgentResponse(_message.Message):
    __slots__ = ("agent",)
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: Agent
    def __init__(self, agent: _Optional[_Union[Agent, _Mapping]] = ...) -> None: ...

class ListAgentsRequest(_message.Message):
    __slots__ = ("tenant_id", "page_size", "page_token")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    page_size: int
    page_token: str
    def __init__(self, tenant_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAgentsResponse(_message.Message):
    __slots__ = ("agents", "next_page_token")
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[Agent]
    next_page_token: str
    def __init__(self, agents: _Optional[_Iterable[_Union[Agent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CreateApiKeyRequest(_message.Message):
    __slots__ = ("tenant_id", "agent_id", "role", "display_name")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    agent_id: str
    role: Role
    display_name: str
    def __init__(self, tenant_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., display_name: _Optional[str] = ...) -> None: ...

class CreateApiKeyResponse(_message.Message):
    __slots__ = ("api_key", "secret")
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    api_key: ApiKey
    secret: str
    def __init__(self, api_key: _Optional[_Union[ApiKey, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ListApiKeysRequest(_message.Message):
    __slots__ = ("tenant_id", "page_size", "page_token")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    page_size: int
    page_token: str
    def __init__(self, tenant_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListApiKeysResponse(_message.Message):
    __slots__ = ("api_keys", "next_page_token")
    API_KEYS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    api_keys: _containers.RepeatedCompositeFieldContainer[ApiKey]
    next_page_token: str
    def __init__(self, api_keys: _Optional[_Iterable[_Union[ApiKey, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RevokeApiKeyRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeApiKeyResponse(_message.Message):
    __slots__ = ("api_key",)
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    api_key: ApiKey
    def __init__(self, api_key: _Optional[_Union[ApiKey, _Mapping]] = ...) -> None: ...

class CreateDomainRequest(_message.Message):
    __slots__ = ("domain",)
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    domain: Domain
    def __init__(self, domain: _Optional[_Union[Domain, _Mapping]] = ...) -> None: ...

class CreateDomainResponse(_message.Message):
    __slots__ = ("domain",)
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    domain: Domain
    def __init__(self, domain: _Optional[_Union[Domain, _Mapping]] = ...) -> None: ...

class ListDomainsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListDomainsResponse(_message.Message):
    __slots__ = ("domains", "next_page_token")
    DOMAINS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    domains: _containers.RepeatedCompositeFieldContainer[Domain]
    next_page_token: str
    def __init__(self, domains: _Optional[_Iterable[_Union[Domain, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GrantDomainRequest(_message.Message):
    __slots__ = ("grant",)
    GRANT_FIELD_NUMBER: _ClassVar[int]
    grant: DomainGrant
    def __init__(self, grant: _Optional[_Union[DomainGrant, _Mapping]] = ...) -> None: ...

class GrantDomainResponse(_message.Message):
    __slots__ = ("grant",)
    GRANT_FIELD_NUMBER: _ClassVar[int]
    grant: DomainGrant
    def __init__(self, grant: _Optional[_Union[DomainGrant, _Mapping]] = ...) -> None: ...

class RevokeDomainGrantRequest(_message.Message):
    __slots__ = ("domain", "tenant_id")
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    domain: str
    tenant_id: str
    def __init__(self, domain: _Optional[str] = ..., tenant_id: _Optional[str] = ...) -> None: ...

class RevokeDomainGrantResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDomainGrantsRequest(_message.Message):
    __slots__ = ("domain", "tenant_id")
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    domain: str
    tenant_id: str
    def __init__(self, domain: _Optional[str] = ..., tenant_id: _Optional[str] = ...) -> None: ...

class ListDomainGrantsResponse(_message.Message):
    __slots__ = ("grants",)
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    grants: _containers.RepeatedCompositeFieldContainer[DomainGrant]
    def __init__(self, grants: _Optional[_Iterable[_Union[DomainGrant, _Mapping]]] = ...) -> None: ...

class ListAuditEventsRequest(_message.Message):
    __slots__ = ("tenant_id", "page_size", "page_token")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    page_size: int
    page_token: str
    def __init__(self, tenant_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAuditEventsResponse(_message.Message):
    __slots__ = ("events", "next_page_token")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[AuditEvent]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[AuditEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class LifecycleKindRule(_message.Message):
    __slots__ = ("kind", "ttl_days", "unused_days", "unused_below_confidence", "value_half_life_days", "min_value", "review_min_uses", "review_below_confidence", "demote_after_days", "demote_max_uses", "demote_min_confidence", "demote_weight")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TTL_DAYS_FIELD_NUMBER: _ClassVar[int]
    UNUSED_DAYS_FIELD_NUMBER: _ClassVar[int]
    UNUSED_BELOW_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    VALUE_HALF_LIFE_DAYS_FIELD_NUMBER: _ClassVar[int]
    MIN_VALUE_FIELD_NUMBER: _ClassVar[int]
    REVIEW_MIN_USES_FIELD_NUMBER: _ClassVar[int]
    REVIEW_BELOW_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    DEMOTE_AFTER_DAYS_FIELD_NUMBER: _ClassVar[int]
    DEMOTE_MAX_USES_FIELD_NUMBER: _ClassVar[int]
    DEMOTE_MIN_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    DEMOTE_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    kind: _memory_pb2.Kind
    ttl_days: float
    unused_days: float
    unused_below_confidence: float
    value_half_life_days: float
    min_value: float
    review_min_uses: int
    review_below_confidence: float
    demote_after_days: float
    demote_max_uses: int
    demote_min_confidence: float
    demote_weight: float
    def __init__(self, kind: _Optional[_Union[_memory_pb2.Kind, str]] = ..., ttl_days: _Optional[float] = ..., unused_days: _Optional[float] = ..., unused_below_confidence: _Optional[float] = ..., value_half_life_days: _Optional[float] = ..., min_value: _Optional[float] = ..., review_min_uses: _Optional[int] = ..., review_below_confidence: _Optional[float] = ..., demote_after_days: _Optional[float] = ..., demote_max_uses: _Optional[int] = ..., demote_min_confidence: _Optional[float] = ..., demote_weight: _Optional[float] = ...) -> None: ...

class LifecyclePolicy(_message.Message):
    __slots__ = ("tenant_id", "enabled", "hard_delete", "archive_tasks_after_days", "rules", "is_set", "update_time")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    HARD_DELETE_FIELD_NUMBER: _ClassVar[int]
    ARCHIVE_TASKS_AFTER_DAYS_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    IS_SET_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    enabled: bool
    hard_delete: bool
    archive_tasks_after_days: float
    rules: _containers.RepeatedCompositeFieldContainer[LifecycleKindRule]
    is_set: bool
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, tenant_id: _Optional[str] = ..., enabled: _Optional[bool] = ..., hard_delete: _Optional[bool] = ..., archive_tasks_after_days: _Optional[float] = ..., rules: _Optional[_Iterable[_Union[LifecycleKindRule, _Mapping]]] = ..., is_set: _Optional[bool] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LifecycleRuleResult(_message.Message):
    __slots__ = ("rule", "count", "memory_ids")
    RULE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    rule: str
    count: int
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rule: _Optional[str] = ..., count: _Optional[int] = ..., memory_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class LifecycleReport(_message.Message):
    __slots__ = ("tenant_id", "run_time", "dry_run", "examined", "results")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_TIME_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    EXAMINED_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    run_time: _timestamp_pb2.Timestamp
    dry_run: bool
    examined: int
    results: _containers.RepeatedCompositeFieldContainer[LifecycleRuleResult]
    def __init__(self, tenant_id: _Optional[str] = ..., run_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., dry_run: _Optional[bool] = ..., examined: _Optional[int] = ..., results: _Optional[_Iterable[_Union[LifecycleRuleResult, _Mapping]]] = ...) -> None: ...

class SetLifecyclePolicyRequest(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: LifecyclePolicy
    def __init__(self, policy: _Optional[_Union[LifecyclePolicy, _Mapping]] = ...) -> None: ...

class SetLifecyclePolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: LifecyclePolicy
    def __init__(self, policy: _Optional[_Union[LifecyclePolicy, _Mapping]] = ...) -> None: ...

class GetLifecyclePolicyRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class GetLifecyclePolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: LifecyclePolicy
    def __init__(self, policy: _Optional[_Union[LifecyclePolicy, _Mapping]] = ...) -> None: ...

class RunLifecycleRequest(_message.Message):
    __slots__ = ("tenant_id", "dry_run")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    dry_run: bool
    def __init__(self, tenant_id: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class RunLifecycleResponse(_message.Message):
    __slots__ = ("report",)
    REPORT_FIELD_NUMBER: _ClassVar[int]
    report: LifecycleReport
    def __init__(self, report: _Optional[_Union[LifecycleReport, _Mapping]] = ...) -> None: ...

class ContentRule(_message.Message):
    __slots__ = ("name", "action")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    action: ContentAction
    def __init__(self, name: _Optional[str] = ..., action: _Optional[_Union[ContentAction, str]] = ...) -> None: ...

class ContentPolicy(_message.Message):
    __slots__ = ("tenant_id", "domain", "rules", "effective", "is_set", "update_time", "updated_by")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_FIELD_NUMBER: _ClassVar[int]
    IS_SET_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATED_BY_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    domain: str
    rules: _containers.RepeatedCompositeFieldContainer[ContentRule]
    effective: _containers.RepeatedCompositeFieldContainer[ContentRule]
    is_set: bool
    update_time: _timestamp_pb2.Timestamp
    updated_by: str
    def __init__(self, tenant_id: _Optional[str] = ..., domain: _Optional[str] = ..., rules: _Optional[_Iterable[_Union[ContentRule, _Mapping]]] = ..., effective: _Optional[_Iterable[_Union[ContentRule, _Mapping]]] = ..., is_set: _Optional[bool] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_by: _Optional[str] = ...) -> None: ...

class SetContentPolicyRequest(_message.Message):
    __slots__ = ("policy", "reset")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    policy: ContentPolicy
    reset: bool
    def __init__(self, policy: _Optional[_Union[ContentPolicy, _Mapping]] = ..., reset: _Optional[bool] = ...) -> None: ...

class SetContentPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: ContentPolicy
    def __init__(self, policy: _Optional[_Union[ContentPolicy, _Mapping]] = ...) -> None: ...

class GetContentPolicyRequest(_message.Message):
    __slots__ = ("tenant_id", "domain")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    domain: str
    def __init__(self, tenant_id: _Optional[str] = ..., domain: _Optional[str] = ...) -> None: ...

class GetContentPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: ContentPolicy
    def __init__(self, policy: _Optional[_Union[ContentPolicy, _Mapping]] = ...) -> None: ...

class ScanContentPolicyRequest(_message.Message):
    __slots__ = ("tenant_id", "domain", "proposed")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    domain: str
    proposed: ContentPolicy
    def __init__(self, tenant_id: _Optional[str] = ..., domain: _Optional[str] = ..., proposed: _Optional[_Union[ContentPolicy, _Mapping]] = ...) -> None: ...

class ContentScanCount(_message.Message):
    __slots__ = ("detector", "action", "memories")
    DETECTOR_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    detector: str
    action: ContentAction
    memories: int
    def __init__(self, detector: _Optional[str] = ..., action: _Optional[_Union[ContentAction, str]] = ..., memories: _Optional[int] = ...) -> None: ...

class ContentScanReport(_message.Message):
    __slots__ = ("examined", "counts", "refused", "redacted", "tagged", "refused_memory_ids", "redacted_memory_ids", "tagged_memory_ids")
    EXAMINED_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    REDACTED_FIELD_NUMBER: _ClassVar[int]
    TAGGED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    REDACTED_MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    TAGGED_MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    examined: int
    counts: _containers.RepeatedCompositeFieldContainer[ContentScanCount]
    refused: int
    redacted: int
    tagged: int
    refused_memory_ids: _containers.RepeatedScalarFieldContainer[str]
    redacted_memory_ids: _containers.RepeatedScalarFieldContainer[str]
    tagged_memory_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, examined: _Optional[int] = ..., counts: _Optional[_Iterable[_Union[ContentScanCount, _Mapping]]] = ..., refused: _Optional[int] = ..., redacted: _Optional[int] = ..., tagged: _Optional[int] = ..., refused_memory_ids: _Optional[_Iterable[str]] = ..., redacted_memory_ids: _Optional[_Iterable[str]] = ..., tagged_memory_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ScanContentPolicyResponse(_message.Message):
    __slots__ = ("report",)
    REPORT_FIELD_NUMBER: _ClassVar[int]
    report: ContentScanReport
    def __init__(self, report: _Optional[_Union[ContentScanReport, _Mapping]] = ...) -> None: ...

class TokenCount(_message.Message):
    __slots__ = ("day", "stage", "model", "input_tokens", "output_tokens", "completions")
    DAY_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    day: str
    stage: str
    model: str
    input_tokens: int
    output_tokens: int
    completions: int
    def __init__(self, day: _Optional[str] = ..., stage: _Optional[str] = ..., model: _Optional[str] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., completions: _Optional[int] = ...) -> None: ...

class TokenBudget(_message.Message):
    __slots__ = ("tenant_id", "tokens_per_day", "is_set", "update_time", "updated_by")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_DAY_FIELD_NUMBER: _ClassVar[int]
    IS_SET_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATED_BY_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    tokens_per_day: int
    is_set: bool
    update_time: _timestamp_pb2.Timestamp
    updated_by: str
    def __init__(self, tenant_id: _Optional[str] = ..., tokens_per_day: _Optional[int] = ..., is_set: _Optional[bool] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_by: _Optional[str] = ...) -> None: ...

class GetTokenUsageRequest(_message.Message):
    __slots__ = ("tenant_id", "start_day", "end_day")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    START_DAY_FIELD_NUMBER: _ClassVar[int]
    END_DAY_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    start_day: str
    end_day: str
    def __init__(self, tenant_id: _Optional[str] = ..., start_day: _Optional[str] = ..., end_day: _Optional[str] = ...) -> None: ...

class GetTokenUsageResponse(_message.Message):
    __slots__ = ("tenant_id", "start_day", "end_day", "counts", "budget", "spent_today")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    START_DAY_FIELD_NUMBER: _ClassVar[int]
    END_DAY_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    SPENT_TODAY_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    start_day: str
    end_day: str
    counts: _containers.RepeatedCompositeFieldContainer[TokenCount]
    budget: TokenBudget
    spent_today: int
    def __init__(self, tenant_id: _Optional[str] = ..., start_day: _Optional[str] = ..., end_day: _Optional[str] = ..., counts: _Optional[_Iterable[_Union[TokenCount, _Mapping]]] = ..., budget: _Optional[_Union[TokenBudget, _Mapping]] = ..., spent_today: _Optional[int] = ...) -> None: ...

class SetTokenBudgetRequest(_message.Message):
    __slots__ = ("tenant_id", "tokens_per_day", "reset")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_DAY_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    tokens_per_day: int
    reset: bool
    def __init__(self, tenant_id: _Optional[str] = ..., tokens_per_day: _Optional[int] = ..., reset: _Optional[bool] = ...) -> None: ...

class SetTokenBudgetResponse(_message.Message):
    __slots__ = ("budget",)
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    budget: TokenBudget
    def __init__(self, budget: _Optional[_Union[TokenBudget, _Mapping]] = ...) -> None: ...

class GetUsageRequest(_message.Message):
    __slots__ = ("tenant_id", "start_day", "end_day")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    START_DAY_FIELD_NUMBER: _ClassVar[int]
    END_DAY_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    start_day: str
    end_day: str
    def __init__(self, tenant_id: _Optional[str] = ..., start_day: _Optional[str] = ..., end_day: _Optional[str] = ...) -> None: ...

class StoredUsage(_message.Message):
    __slots__ = ("layer", "scope", "memories", "bytes")
    LAYER_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    layer: _memory_pb2.Layer
    scope: _memory_pb2.Scope
    memories: int
    bytes: int
    def __init__(self, layer: _Optional[_Union[_memory_pb2.Layer, str]] = ..., scope: _Optional[_Union[_memory_pb2.Scope, str]] = ..., memories: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class DayUsage(_message.Message):
    __slots__ = ("day", "calls", "texts_embedded", "tokens", "stored", "stored_at")
    class CallsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class TokensEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    DAY_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    TEXTS_EMBEDDED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    STORED_AT_FIELD_NUMBER: _ClassVar[int]
    day: str
    calls: _containers.ScalarMap[str, int]
    texts_embedded: int
    tokens: _containers.ScalarMap[str, int]
    stored: _containers.RepeatedCompositeFieldContainer[StoredUsage]
    stored_at: _timestamp_pb2.Timestamp
    def __init__(self, day: _Optional[str] = ..., calls: _Optional[_Mapping[str, int]] = ..., texts_embedded: _Optional[int] = ..., tokens: _Optional[_Mapping[str, int]] = ..., stored: _Optional[_Iterable[_Union[StoredUsage, _Mapping]]] = ..., stored_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class TenantUsage(_message.Message):
    __slots__ = ("tenant_id", "days")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DAYS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    days: _containers.RepeatedCompositeFieldContainer[DayUsage]
    def __init__(self, tenant_id: _Optional[str] = ..., days: _Optional[_Iterable[_Union[DayUsage, _Mapping]]] = ...) -> None: ...

class GetUsageResponse(_message.Message):
    __slots__ = ("start_day", "end_day", "tenants")
    START_DAY_FIELD_NUMBER: _ClassVar[int]
    END_DAY_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    start_day: str
    end_day: str
    tenants: _containers.RepeatedCompositeFieldContainer[TenantUsage]
    def __init__(self, start_day: _Optional[str] = ..., end_day: _Optional[str] = ..., tenants: _Optional[_Iterable[_Union[TenantUsage, _Mapping]]] = ...) -> None: ...
