"""The MCP tools: remember, recall, reflect, forget, memory_history, working_memory.

Each tool is one async function, and its typed signature is the only definition of its
arguments: the MCP SDK derives the input schema from it and validates every call against it
before the body runs; the returned pydantic model is the output schema. Bodies only translate
to the Python SDK, so every rule (visibility, validation, roles) stays the server's.
"""
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, TypeVar, cast

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import AwareDatetime, BaseModel, Field

from memplane import AsyncMemoryClient, MemplaneError
from memplane import types as sdk
from memplane.enums import Kind, Layer, ProtoEnum, Scope, TaskOutcome


def enum_names(enum: type[ProtoEnum]) -> Any:
    """A Literal of the SDK enum's member names in lower case, UNSPECIFIED left out: the schema
    then lists exactly the values the SDK accepts, and follows the enum when it grows."""
    return Literal[tuple(member.name.lower() for member in enum if member.value != 0)]


if TYPE_CHECKING:
    # A Literal made at run time is beyond a type checker; to it the names are strings.
    KindName = str
    ScopeName = str
    LayerName = str
    OutcomeName = str
else:
    KindName = enum_names(Kind)
    ScopeName = enum_names(Scope)
    LayerName = enum_names(Layer)
    OutcomeName = enum_names(TaskOutcome)


class Connector(Protocol):
    """Gives a tool call the client of its caller (server.py has one per transport)."""

    def client(self, ctx: Context) -> AbstractAsyncContextManager[AsyncMemoryClient]: ...


@asynccontextmanager
async def memplane(ctx: Context) -> AsyncIterator[AsyncMemoryClient]:
    """The caller's client; a failed call becomes a tool error that carries the server's code
    and reason (`PERMISSION_DENIED [READ_ONLY_KEY]: ...`), for the model to read."""
    connector = cast(Connector, ctx.request_context.lifespan_context)
    try:
        async with connector.client(ctx) as client:
            yield client
    except MemplaneError as exc:
        raise ToolError(str(exc)) from exc
    except ValueError as exc:
        # The SDK checks some combinations before sending (a task or a session, ids or a filter).
        raise ToolError(f"INVALID_ARGUMENT: {exc}") from exc


def given(**values: Any) -> dict[str, Any]:
    """The arguments the caller set: None and empty ones are left to the server's defaults."""
    return {name: value for name, value in values.items() if value is not None and value != "" and value != []}


# ---- results -------------------------------------------------------------------------------

View = TypeVar("View", bound=BaseModel)


def plain(value: Any) -> Any:
    """An SDK value as JSON sees it: enums by their lower-case name, the same names the inputs take."""
    if isinstance(value, Enum):
        return value.name.lower()
    if isinstance(value, tuple):
        return [plain(item) for item in value]
    return value


def view(model: type[View], result: Any) -> View:
    """The model's fields read off an SDK result, so each field is named once, in the model."""
    return model.model_validate({name: plain(getattr(result, name)) for name in model.model_fields})


class MemoryView(BaseModel):
    """One stored memory."""

    id: str
    tenant_id: str
    scope: str
    domain: str
    agent_id: str
    user_id: str
    session_id: str
    layer: str
    kind: str
    content: str
    context: str
    entity: str
    attribute: str
    value: str
    tags: list[str]
    confidence: float
    status: str
    occurred_at: datetime | None
    valid_from: datetime | None
    valid_to: datetime | None
    create_time: datetime | None
    update_time: datetime | None
    expire_time: datetime | None


class RememberedView(MemoryView):
    """The memory as stored, and what became of the input: "created"; "merged" when a memory stating
    the same thing was stored already (that memory is returned, related_memory_id names it);
    "superseded" when it replaced an entity's old value; "needs_confirmation" when it contradicts a
    confident one."""

    outcome: str
    related_memory_id: str
    reason: str


class ScoreView(BaseModel):
    """One part of a hit's score: a retrieval channel's rank and weight, or an adjustment factor."""

    name: str
    value: float
    rank: int
    detail: str


class HitView(BaseModel):
    score: float
    memory: MemoryView
    explanation: list[ScoreView]


class RecallView(BaseModel):
    """Hits, best first."""

    hits: list[HitView]


class ReflectView(BaseModel):
    """What a reflection stored; a large one runs in the background as `operation_id`."""

    summary: str
    merged_count: int
    used_llm: bool
    memories: list[MemoryView]
    operation_id: str


class ForgetView(BaseModel):
    forgotten_count: int
    forgotten_ids: list[str]


class HistoryEntryView(BaseModel):
    """One change; `memory` is the memory as it was right after it."""

    memory_id: str
    action: str
    change_time: datetime | None
    actor: str
    reason: str
    memory: MemoryView | None


class HistoryView(BaseModel):
    """Changes, newest first; pass `next_page_token` back for more."""

    entries: list[HistoryEntryView]
    next_page_token: str


class WorkingMemoryView(BaseModel):
    """A session's state and its recent items, newest first."""

    state: dict[str, str]
    items: list[MemoryView]
    expire_time: datetime | None


def hit_view(hit: sdk.SearchHit) -> HitView:
    return HitView(
        score=hit.score, memory=view(MemoryView, hit.memory), explanation=[view(ScoreView, c) for c in hit.explanation]
    )


def history_entry_view(entry: sdk.HistoryEntry) -> HistoryEntryView:
    return HistoryEntryView(
        memory_id=entry.memory_id,
        action=plain(entry.action),
        change_time=entry.change_time,
        actor=entry.actor,
        reason=entry.reason,
        memory=view(MemoryView, entry.snapshot) if entry.snapshot else None,
    )


# ---- tools ---------------------------------------------------------------------------------

class TaskStep(BaseModel):
    action: Annotated[str, Field(description="what the agent did")]
    observation: Annotated[str, Field(description="what came back")] = ""


Tags = Annotated[list[str] | None, Field(description="labels to file it under / to filter by")]
UserId = Annotated[str | None, Field(description="the user it is about")]
SessionId = Annotated[str | None, Field(description="the conversation or task it belongs to")]
Entity = Annotated[str | None, Field(description='what a fact is about, e.g. "user" or "service.payments"')]


async def remember(
    ctx: Context,
    content: Annotated[str, Field(description="what to remember, in plain words")],
    kind: Annotated[
        KindName,
        Field(description="turn or event: what happened; fact or preference: what is true; "
                          "procedure or lesson: how to act; summary"),
    ],
    scope: Annotated[
        ScopeName | None,
        Field(description="global: the whole team; domain: every team in `domain`; private: this agent "
                          "only. Unset: private for an agent's key, else global"),
    ] = None,
    domain: Annotated[str | None, Field(description="the shared domain of a domain-scoped memory")] = None,
    entity: Entity = None,
    attribute: Annotated[str | None, Field(description='the property of the entity, e.g. "city"')] = None,
    value: Annotated[str | None, Field(description="its value; a new value supersedes the old one")] = None,
    context: Annotated[str | None, Field(description="when the memory applies")] = None,
    tags: Tags = None,
    user_id: UserId = None,
    session_id: SessionId = None,
    confidence: Annotated[float | None, Field(ge=0, le=1, description="below 0.7 it is kept as pending")] = None,
    occurred_at: Annotated[AwareDatetime | None, Field(description="when it happened (ISO 8601 with offset)")] = None,
    layer: Annotated[
        LayerName | None,
        Field(description="working: the session's short-lived working memory (needs session_id); unset: the "
                          "kind's layer"),
    ] = None,
    ttl_seconds: Annotated[float | None, Field(gt=0, description="lifetime of a working-memory item")] = None,
    state_key: Annotated[str | None, Field(description="working memory: set this session state key to content")] = None,
) -> RememberedView:
    """Store one memory in Memplane; returns it as stored and whether it was merged into a memory
    stating the same thing."""
    fields = given(
        scope=scope, domain=domain, entity=entity, attribute=attribute, value=value, context=context, tags=tags,
        user_id=user_id, session_id=session_id, confidence=confidence, occurred_at=occurred_at, layer=layer,
        ttl=ttl_seconds, state_key=state_key,
    )
    async with memplane(ctx) as client:
        written = await client.write([{"content": content, "kind": kind, **fields}])
    [memory], [result] = written.memories, written.results
    return RememberedView(**view(MemoryView, memory).model_dump(), outcome=plain(result.outcome),
                          related_memory_id=result.related_memory_id, reason=result.reason)


async def recall(
    ctx: Context,
    query: Annotated[str, Field(description="what to look for, as a question or keywords")],
    top_k: Annotated[int, Field(ge=1, le=100, description="most hits to return")] = 10,
    explain: Annotated[bool, Field(description="give every hit's score parts (channels and factors)")] = True,
    scopes: Annotated[list[ScopeName] | None, Field(description="only these scopes")] = None,
    kinds: Annotated[list[KindName] | None, Field(description="only these kinds")] = None,
    entity: Entity = None,
    tags: Tags = None,
    user_id: UserId = None,
    session_id: Annotated[str | None, Field(description="only this session; also searches its working memory")] = None,
    include_pending: Annotated[bool, Field(description="also memories below the confidence threshold")] = False,
    as_of: Annotated[AwareDatetime | None, Field(description="read memories as they were at this time")] = None,
    time_zone: Annotated[str | None, Field(description='IANA zone for times named in the query, e.g. "Asia/Shanghai"')] = None,
) -> RecallView:
    """Search the memories this key may read (hybrid: vectors, keywords, facts, time), best first."""
    filters = given(
        scopes=scopes, kinds=kinds, entity=entity, tags=tags, user_id=user_id, session_id=session_id,
        include_pending=include_pending,
    )
    async with memplane(ctx) as client:
        result = await client.search(query, top_k=top_k, explain=explain, as_of=as_of, time_zone=time_zone, **filters)
    return RecallView(hits=[hit_view(hit) for hit in result.hits])


async def reflect(
    ctx: Context,
    request: Annotated[str | None, Field(description="the task as it was asked (give this or session_id)")] = None,
    steps: Annotated[list[TaskStep] | None, Field(description="what was done, in order")] = None,
    outcome: Annotated[OutcomeName | None, Field(description="how the task ended")] = None,
    feedback: Annotated[str | None, Field(description="what the user said about the result")] = None,
    task_id: Annotated[str | None, Field(description="id the derived memories cite as their source")] = None,
    session_id: Annotated[str | None, Field(description="reflect on this session instead of a task")] = None,
    scope: Annotated[ScopeName | None, Field(description="where derived memories go (unset: the server's default)")] = None,
    domain: Annotated[str | None, Field(description="the domain of domain-scoped derived memories")] = None,
) -> ReflectView:
    """Distil a finished task, or a session, into lessons, facts and a summary, and store them."""
    task = None
    if request is not None:
        task = given(request=request, steps=[s.model_dump() for s in steps or ()], outcome=outcome,
                     feedback=feedback, task_id=task_id)
    async with memplane(ctx) as client:
        result = await client.reflect(task=task, session_id=session_id, scope=scope, domain=domain)
    return ReflectView(
        summary=result.summary,
        merged_count=result.merged_count,
        used_llm=result.used_llm,
        memories=[view(MemoryView, m) for m in result.memories],
        operation_id=result.operation.id if result.operation else "",
    )


async def forget(
    ctx: Context,
    ids: Annotated[list[str] | None, Field(description="these memories (or give filters instead)")] = None,
    user_id: Annotated[str | None, Field(description="everything about this user")] = None,
    session_id: Annotated[str | None, Field(description="everything of this session")] = None,
    entity: Entity = None,
    kinds: Annotated[list[KindName] | None, Field(description="only these kinds")] = None,
    scopes: Annotated[list[ScopeName] | None, Field(description="only these scopes")] = None,
    tags: Tags = None,
    hard: Annotated[bool, Field(description="erase for good; otherwise restorable")] = False,
    dry_run: Annotated[bool, Field(description="only count what would be forgotten")] = False,
    reason: Annotated[str, Field(description="why, for the audit log")] = "",
) -> ForgetView:
    """Forget memories by ids or by filter (one of the two), soft unless `hard`."""
    filters = given(user_id=user_id, session_id=session_id, entity=entity, kinds=kinds, scopes=scopes, tags=tags)
    async with memplane(ctx) as client:
        # Models often send `ids: []` beside a filter; an empty list names no memory, so it is no ids.
        result = await client.forget(ids=ids or None, hard=hard, dry_run=dry_run, reason=reason, **filters)
    return view(ForgetView, result)


async def memory_history(
    ctx: Context,
    entity: Annotated[str, Field(description='the entity, e.g. "user"')],
    attribute: Annotated[str | None, Field(description='only this attribute, e.g. "city"')] = None,
    page_size: Annotated[int, Field(ge=1, le=100, description="most entries to return")] = 20,
    page_token: Annotated[str, Field(description="next_page_token of the previous call")] = "",
) -> HistoryView:
    """How what is known about an entity changed over time: every version, newest first."""
    async with memplane(ctx) as client:
        page = await client.list_history(
            entity=entity, attribute=attribute or None, page_size=page_size, page_token=page_token
        )
    return HistoryView(entries=[history_entry_view(e) for e in page.items], next_page_token=page.next_page_token)


async def working_memory(
    ctx: Context,
    session_id: Annotated[str, Field(description="the session")],
) -> WorkingMemoryView:
    """A session's working memory: its state keys and its recent items."""
    async with memplane(ctx) as client:
        working = await client.get_working_memory(session_id)
    return WorkingMemoryView(
        state=working.state, items=[view(MemoryView, m) for m in working.items], expire_time=working.expire_time
    )


TOOLS = (remember, recall, reflect, forget, memory_history, working_memory)
