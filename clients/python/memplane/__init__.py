"""Python SDK for Memplane, the multi-tenant memory platform for LLM agents.

    from memplane import MemoryClient

    with MemoryClient("localhost:50051", api_key) as client:
        client.write_one("The user lives in Shanghai", kind="fact", entity="user.address")
        hits = client.search("where does the user live", top_k=5).hits

AsyncMemoryClient offers the same methods as coroutines; AdminClient and AsyncAdminClient
manage tenants, agents, keys and domains.
"""
from ._retry import RetryPolicy
from ._version import __version__
from .admin import AdminClient, AsyncAdminClient
from .aio import AsyncMemoryClient
from .client import MemoryClient
from .enums import (
    AdviceKind,
    ChangeKind,
    ContentAction,
    DecisionOutcome,
    DecisionSubject,
    DomainAccess,
    EraseMode,
    HistoryAction,
    InferMode,
    Kind,
    Layer,
    MemoryStatus,
    OperationState,
    PromoteMode,
    ReflectMode,
    Role,
    Scope,
    TaskOutcome,
    WriteOutcome,
)
from .errors import (
    AbortedError,
    AlreadyExistsError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    MemplaneError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
)
from .inputs import FilterArgs, MemoryChanges, MemoryFields, MemoryInput, TaskStep, TaskTrajectory
from .types import (
    Advice,
    Agent,
    ApiKey,
    AuditEvent,
    ChangeEvent,
    Conflict,
    ConflictResolution,
    ContentPolicy,
    ContentScanReport,
    CreatedApiKey,
    CreatedTenant,
    Domain,
    DomainGrant,
    ErasureReceipt,
    ErasureResult,
    ForgetResult,
    HistoryEntry,
    ItemResult,
    LifecycleKindRule,
    LifecyclePolicy,
    LifecycleReport,
    Memory,
    MemoryCluster,
    Operation,
    Page,
    ReflectionDecision,
    ReflectResult,
    ScoreComponent,
    SearchHit,
    SearchResult,
    Stats,
    Tenant,
    TokenBudget,
    TokenCount,
    TokenUsage,
    WatchProgress,
    WorkingMemory,
    WriteResult,
)

__all__ = [
    "__version__",
    # clients
    "MemoryClient", "AsyncMemoryClient", "AdminClient", "AsyncAdminClient", "RetryPolicy",
    # inputs
    "MemoryInput", "TaskStep", "TaskTrajectory", "FilterArgs", "MemoryFields", "MemoryChanges",
    # enums
    "Scope", "Layer", "Kind", "MemoryStatus", "HistoryAction", "Role", "DomainAccess",
    "OperationState", "TaskOutcome", "AdviceKind", "DecisionSubject", "DecisionOutcome", "InferMode", "ReflectMode",
    "PromoteMode", "ChangeKind", "EraseMode", "ContentAction", "WriteOutcome",
    # results
    "Memory", "ScoreComponent", "SearchHit", "SearchResult", "WriteResult", "ItemResult", "ReflectResult",
    "Operation", "ForgetResult", "ErasureResult", "ErasureReceipt", "Page", "HistoryEntry", "WorkingMemory", "Stats",
    "Conflict", "ConflictResolution", "Advice", "ReflectionDecision", "MemoryCluster", "ChangeEvent", "WatchProgress",
    "Tenant", "Agent", "ApiKey", "CreatedApiKey", "CreatedTenant", "Domain", "DomainGrant", "AuditEvent",
    "LifecyclePolicy", "LifecycleKindRule", "LifecycleReport", "ContentPolicy", "ContentScanReport",
    "TokenUsage", "TokenCount", "TokenBudget",
    # errors
    "MemplaneError", "InvalidArgumentError", "NotFoundError", "AlreadyExistsError",
    "PermissionDeniedError", "UnauthenticatedError", "ResourceExhaustedError",
    "FailedPreconditionError", "UnavailableError", "AbortedError", "DeadlineExceededError",
]
