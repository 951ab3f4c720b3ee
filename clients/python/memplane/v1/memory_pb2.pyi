import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Scope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCOPE_UNSPECIFIED: _ClassVar[Scope]
    SCOPE_GLOBAL: _ClassVar[Scope]
    SCOPE_DOMAIN: _ClassVar[Scope]
    SCOPE_PRIVATE: _ClassVar[Scope]

class Layer(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LAYER_UNSPECIFIED: _ClassVar[Layer]
    LAYER_WORKING: _ClassVar[Layer]
    LAYER_EPISODIC: _ClassVar[Layer]
    LAYER_SEMANTIC: _ClassVar[Layer]
    LAYER_PROCEDURAL: _ClassVar[Layer]

class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KIND_UNSPECIFIED: _ClassVar[Kind]
    KIND_TURN: _ClassVar[Kind]
    KIND_EVENT: _ClassVar[Kind]
    KIND_FACT: _ClassVar[Kind]
    KIND_PREFERENCE: _ClassVar[Kind]
    KIND_PROCEDURE: _ClassVar[Kind]
    KIND_LESSON: _ClassVar[Kind]
    KIND_SUMMARY: _ClassVar[Kind]

class MemoryStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_STATUS_UNSPECIFIED: _ClassVar[MemoryStatus]
    MEMORY_STATUS_ACTIVE: _ClassVar[MemoryStatus]
    MEMORY_STATUS_PENDING: _ClassVar[MemoryStatus]
    MEMORY_STATUS_SUPERSEDED: _ClassVar[MemoryStatus]
    MEMORY_STATUS_DELETED: _ClassVar[MemoryStatus]
    MEMORY_STATUS_STALE: _ClassVar[MemoryStatus]
    MEMORY_STATUS_NEEDS_CONFIRMATION: _ClassVar[MemoryStatus]
    MEMORY_STATUS_ARCHIVED: _ClassVar[MemoryStatus]
SCOPE_UNSPECIFIED: Scope
SCOPE_GLOBAL: Scope
SCOPE_DOMAIN: Scope
SCOPE_PRIVATE: Scope
LAYER_UNSPECIFIED: Layer
LAYER_WORKING: Layer
LAYER_EPISODIC: Layer
LAYER_SEMANTIC: Layer
LAYER_PROCEDURAL: Layer
KIND_UNSPECIFIED: Kind
KIND_TURN: Kind
KIND_EVENT: Kind
KIND_FACT: Kind
KIND_PREFERENCE: Kind
KIND_PROCEDURE: Kind
KIND_LESSON: Kind
KIND_SUMMARY: Kind
MEMORY_STATUS_UNSPECIFIED: MemoryStatus
MEMORY_STATUS_ACTIVE: MemoryStatus
MEMORY_STATUS_PENDING: MemoryStatus
MEMORY_STATUS_SUPERSEDED: MemoryStatus
MEMORY_STATUS_DELETED: MemoryStatus
MEMORY_STATUS_STALE: MemoryStatus
MEMORY_STATUS_NEEDS_CONFIRMATION: MemoryStatus
MEMORY_STATUS_ARCHIVED: MemoryStatus

class Source(_message.Message):
    __slots__ = ("type", "id")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    type: str
    id: str
    def __init__(self, type: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class Memory(_message.Message):
    __slots__ = ("id", "tenant_id", "scope", "domain", "agent_id", "user_id", "session_id", "layer", "kind", "content", "context", "entity", "attribute", "value", "tags", "metadata", "confidence", "status", "supersedes", "source", "occurred_at", "valid_from", "valid_to", "create_time", "update_time", "last_used_time", "use_count", "embedding_model", "expire_time", "sources", "conflicts_with", "consolidated_into", "lifecycle_weight", "review_flag_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LAYER_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_TIME_FIELD_NUMBER: _ClassVar[int]
    USE_COUNT_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_MODEL_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_WITH_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATED_INTO_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    REVIEW_FLAG_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    scope: Scope
    domain: str
    agent_id: str
    user_id: str
    session_id: str
    layer: Layer
    kind: Kind
    content: str
    context: str
    entity: str
    attribute: str
    value: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    metadata: _struct_pb2.Struct
    confidence: float
    status: MemoryStatus
    supersedes: str
    source: Source
    occurred_at: _timestamp_pb2.Timestamp
    valid_from: _timestamp_pb2.Timestamp
    valid_to: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    last_used_time: _timestamp_pb2.Timestamp
    use_count: int
    embedding_model: str
    expire_time: _timestamp_pb2.Timestamp
    sources: _containers.RepeatedCompositeFieldContainer[Source]
    conflicts_with: str
    consolidated_into: str
    lifecycle_weight: float
    review_flag_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., scope: _Optional[_Union[Scope, str]] = ..., domain: _Optional[str] = ..., agent_id: _Optional[str] = ..., user_id: _Optional[str] = ..., session_id: _Optional[str] = ..., layer: _Optional[_Union[Layer, str]] = ..., kind: _Optional[_Union[Kind, str]] = ..., content: _Optional[str] = ..., context: _Optional[str] = ..., entity: _Optional[str] = ..., attribute: _Optional[str] = ..., value: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., confidence: _Optional[float] = ..., status: _Optional[_Union[MemoryStatus, str]] = ..., supersedes: _Optional[str] = ..., source: _Optional[_Union[Source, _Mapping]] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_used_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., use_count: _Optional[int] = ..., embedding_model: _Optional[str] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., sources: _Optional[_Iterable[_Union[Source, _Mapping]]] = ..., conflicts_with: _Optional[str] = ..., consolidated_into: _Optional[str] = ..., lifecycle_weight: _Optional[float] = ..., review_flag_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class TimeRange(_message.Message):
    __slots__ = ("start_time", "end_time")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    def __init__(self, start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class MemoryFilter(_message.Message):
    __slots__ = ("scopes", "layers", "kinds", "domains", "agent_id", "user_id", "session_id", "tags", "occurred", "entity", "attribute", "min_confidence", "include_pending", "statuses", "flagged_for_review")
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    DOMAINS_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    MIN_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PENDING_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    FLAGGED_FOR_REVIEW_FIELD_NUMBER: _ClassVar[int]
    scopes: _containers.RepeatedScalarFieldContainer[Scope]
    layers: _containers.RepeatedScalarFieldContainer[Layer]
    kinds: _containers.RepeatedScalarFieldContainer[Kind]
    domains: _containers.RepeatedScalarFieldContainer[str]
    agent_id: str
    user_id: str
    session_id: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    occurred: TimeRange
    entity: str
    attribute: str
    min_confidence: float
    include_pending: bool
    statuses: _containers.RepeatedScalarFieldContainer[MemoryStatus]
    flagged_for_review: bool
    def __init__(self, scopes: _Optional[_Iterable[_Union[Scope, str]]] = ..., layers: _Optional[_Iterable[_Union[Layer, str]]] = ..., kinds: _Optional[_Iterable[_Union[Kind, str]]] = ..., domains: _Optional[_Iterable[str]] = ..., agent_id: _Optional[str] = ..., user_id: _Optional[str] = ..., session_id: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., occurred: _Optional[_Union[TimeRange, _Mapping]] = ..., entity: _Optional[str] = ..., attribute: _Optional[str] = ..., min_confidence: _Optional[float] = ..., include_pending: _Optional[bool] = ..., statuses: _Optional[_Iterable[_Union[MemoryStatus, str]]] = ..., flagged_for_review: _Optional[bool] = ...) -> None: ...
