"""Protobuf messages built from the SDK's inputs: filters, memories, task trajectories and the
enum and list values inside them (shared by the MemoryService request builders)."""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping, TypeVar, cast

from . import _convert
from .enums import Kind, Layer, MemoryStatus, ProtoEnum, Scope, TaskOutcome
from .inputs import FilterArgs, MemoryInput, MemoryInputLike, TaskStep, TaskTrajectory, TaskTrajectoryLike
from .v1 import memory_pb2
from .v1 import memory_service_pb2 as svc_pb

_E = TypeVar("_E", bound=ProtoEnum)
_P = TypeVar("_P", bound=int)

_FILTER_KEYS = frozenset(FilterArgs.__annotations__)
_MEMORY_INPUT_FIELDS = frozenset(f.name for f in fields(MemoryInput))


def many(value: Any) -> list[Any]:
    """A list from None, a single value, or an iterable (a string counts as one value)."""
    if value is None:
        return []
    if isinstance(value, (str, int, ProtoEnum)):
        return [value]
    return list(value)


def wire(proto: type[_P], member: ProtoEnum) -> _P:
    """The proto number of a mirrored member.

    `proto` is the generated enum, there for the type checker: the stubs type each proto enum as
    its own int subclass, while on the wire (and at runtime) the number is a plain int.
    """
    return cast(_P, member.value)


def enum_values(cls: type[_E], proto: type[_P], value: Any) -> list[_P]:
    return [wire(proto, cls.parse(v)) for v in many(value)]


def enum_or_zero(cls: type[_E], proto: type[_P], value: Any) -> _P:
    return cast(_P, 0) if value is None else wire(proto, cls.parse(value))


def memory_filter(filters: Mapping[str, Any]) -> memory_pb2.MemoryFilter:
    """A MemoryFilter from FilterArgs keywords; unknown keywords raise TypeError."""
    unknown = set(filters) - _FILTER_KEYS
    if unknown:
        raise TypeError(f"unknown filter argument(s): {', '.join(sorted(unknown))}")
    pb = memory_pb2.MemoryFilter(
        scopes=enum_values(Scope, memory_pb2.Scope, filters.get("scopes")),
        layers=enum_values(Layer, memory_pb2.Layer, filters.get("layers")),
        kinds=enum_values(Kind, memory_pb2.Kind, filters.get("kinds")),
        statuses=enum_values(MemoryStatus, memory_pb2.MemoryStatus, filters.get("statuses")),
        domains=many(filters.get("domains")),
        tags=many(filters.get("tags")),
        agent_id=filters.get("agent_id") or "",
        user_id=filters.get("user_id") or "",
        session_id=filters.get("session_id") or "",
        entity=filters.get("entity") or "",
        attribute=filters.get("attribute") or "",
        min_confidence=filters.get("min_confidence") or 0.0,
        include_pending=bool(filters.get("include_pending")),
        flagged_for_review=bool(filters.get("flagged_for_review")),
    )
    if filters.get("occurred_after") is not None:
        pb.occurred.start_time.CopyFrom(_convert.to_timestamp(filters["occurred_after"]))
    if filters.get("occurred_before") is not None:
        pb.occurred.end_time.CopyFrom(_convert.to_timestamp(filters["occurred_before"]))
    return pb


def _memory_input_fields(item: MemoryInputLike) -> dict[str, Any]:
    if isinstance(item, MemoryInput):
        return {name: getattr(item, name) for name in _MEMORY_INPUT_FIELDS}
    if not isinstance(item, Mapping):
        raise TypeError(f"a memory must be a MemoryInput or a dict, not {type(item).__name__}")
    values = dict(item)
    source = values.pop("source", None)
    if source is not None:
        values.setdefault("source_type", source.get("type", ""))
        values.setdefault("source_id", source.get("id", ""))
    unknown = set(values) - _MEMORY_INPUT_FIELDS
    if unknown:
        raise TypeError(f"unknown memory field(s): {', '.join(sorted(unknown))}")
    for required in ("content", "kind"):
        if values.get(required) is None:
            raise TypeError(f"a memory needs {required!r}")
    return values


def memory_input(item: MemoryInputLike) -> svc_pb.MemoryInput:
    """A MemoryInput proto from a MemoryInput dataclass or a dict with the proto field names."""
    v = _memory_input_fields(item)
    pb = svc_pb.MemoryInput(
        content=v["content"],
        kind=wire(memory_pb2.Kind, Kind.parse(v["kind"])),
        scope=enum_or_zero(Scope, memory_pb2.Scope, v.get("scope")),
        layer=enum_or_zero(Layer, memory_pb2.Layer, v.get("layer")),
        domain=v.get("domain") or "",
        context=v.get("context") or "",
        entity=v.get("entity") or "",
        attribute=v.get("attribute") or "",
        value=v.get("value") or "",
        tags=many(v.get("tags")),
        user_id=v.get("user_id") or "",
        session_id=v.get("session_id") or "",
        state_key=v.get("state_key") or "",
    )
    if v.get("source_type") or v.get("source_id"):
        pb.source.type = v.get("source_type") or ""
        pb.source.id = v.get("source_id") or ""
    if v.get("metadata") is not None:
        pb.metadata.CopyFrom(_convert.to_struct(v["metadata"]))
    # confidence is a proto3 optional: leaving it unset means 1.0, so 0.0 must still be sent.
    if v.get("confidence") is not None:
        pb.confidence = v["confidence"]
    for name in ("occurred_at", "valid_from", "valid_to"):
        if v.get(name) is not None:
            getattr(pb, name).CopyFrom(_convert.to_timestamp(v[name]))
    if v.get("ttl") is not None:
        pb.ttl.CopyFrom(_convert.to_duration(v["ttl"]))
    return pb


def _task_step(step: TaskStep | Mapping[str, Any]) -> svc_pb.TaskStep:
    s = step if isinstance(step, TaskStep) else TaskStep(**step)
    pb = svc_pb.TaskStep(action=s.action, observation=s.observation)
    if s.occurred_at is not None:
        pb.occurred_at.CopyFrom(_convert.to_timestamp(s.occurred_at))
    return pb


def task_trajectory(task: TaskTrajectoryLike) -> svc_pb.TaskTrajectory:
    """A TaskTrajectory proto from the dataclass or a dict with the same keys."""
    t = task if isinstance(task, TaskTrajectory) else TaskTrajectory(**task)
    return svc_pb.TaskTrajectory(
        task_id=t.task_id,
        request=t.request,
        steps=[_task_step(s) for s in t.steps],
        outcome=enum_or_zero(TaskOutcome, svc_pb.TaskOutcome, t.outcome),
        feedback=t.feedback,
        used_memory_ids=list(t.used_memory_ids),
        attempts=t.attempts,
    )
