"""Python mirrors of the memplane.v1 enums; member values are the proto numbers.

Every SDK method that takes one of these also accepts a plain string: the member name in any
case ("private", "PRIVATE"), the full proto name ("SCOPE_PRIVATE"), or the proto number.
"""
from __future__ import annotations

import enum
import re
from typing import TypeVar, Union

_E = TypeVar("_E", bound="ProtoEnum")


class ProtoEnum(enum.Enum):
    """Base of the mirrored enums: adds lenient parsing from strings and numbers."""

    @classmethod
    def proto_prefix(cls) -> str:
        """The prefix the proto gives this enum's value names, e.g. "MEMORY_STATUS_"."""
        return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).upper() + "_"

    @classmethod
    def parse(cls: type[_E], value: _E | str | int) -> _E:
        """Returns the member for an enum member, a name ("fact", "KIND_FACT") or a proto number."""
        if isinstance(value, cls):
            return value
        if isinstance(value, bool):  # bool is an int; True must not silently become member 1
            raise TypeError(f"{cls.__name__} expects a {cls.__name__}, a name or a number, not bool")
        if isinstance(value, int):
            return cls(value)
        if isinstance(value, str):
            name = value.strip().upper().replace("-", "_")
            name = name.removeprefix(cls.proto_prefix())
            try:
                return cls[name]
            except KeyError:
                valid = ", ".join(m.name.lower() for m in cls if m.value != 0)
                raise ValueError(f"unknown {cls.__name__} {value!r}; expected one of: {valid}") from None
        raise TypeError(f"{cls.__name__} expects a {cls.__name__}, a name or a number, not {type(value).__name__}")

    @classmethod
    def from_proto(cls: type[_E], number: int) -> _E:
        """Returns the member for a number read off the wire.

        A newer server may send values this SDK does not know yet; they read as UNSPECIFIED
        rather than failing the whole response.
        """
        member = cls._value2member_map_.get(number)  # the lookup cls(number) makes, without its call
        return member if member is not None else cls(0)  # type: ignore[return-value]


class Scope(ProtoEnum):
    """Where a memory lives and therefore who may read it."""

    UNSPECIFIED = 0
    GLOBAL = 1
    DOMAIN = 2
    PRIVATE = 3


class Layer(ProtoEnum):
    """The storage layer of a memory."""

    UNSPECIFIED = 0
    WORKING = 1
    EPISODIC = 2
    SEMANTIC = 3
    PROCEDURAL = 4


class Kind(ProtoEnum):
    """What a memory is."""

    UNSPECIFIED = 0
    TURN = 1
    EVENT = 2
    FACT = 3
    PREFERENCE = 4
    PROCEDURE = 5
    LESSON = 6
    SUMMARY = 7


class MemoryStatus(ProtoEnum):
    """Lifecycle state of a memory."""

    UNSPECIFIED = 0
    ACTIVE = 1
    PENDING = 2
    SUPERSEDED = 3
    DELETED = 4
    STALE = 5
    NEEDS_CONFIRMATION = 6
    ARCHIVED = 7


class HistoryAction(ProtoEnum):
    """What a history entry records."""

    UNSPECIFIED = 0
    CREATED = 1
    UPDATED = 2
    SUPERSEDED = 3
    MERGED = 4
    DELETED = 5
    RESTORED = 6
    FEEDBACK = 7
    REOBSERVED = 8
    ERASED = 9
    STALE = 10
    CONFIRMED = 11


class ChangeKind(ProtoEnum):
    """What happened to a memory, as a watch reports it."""

    UNSPECIFIED = 0
    CREATED = 1
    SUPERSEDED = 2
    UPDATED = 3
    FORGOTTEN = 4  # soft forget (restorable)
    ERASED = 5  # hard forget; the event carries no memory
    SUMMARY_STALE = 6  # a summary turned STALE when one of its sources changed


class Role(ProtoEnum):
    """What an API key may do."""

    UNSPECIFIED = 0
    PLATFORM_ADMIN = 1
    TENANT_ADMIN = 2
    WRITER = 3
    READER = 4
    AGENT = 5


class DomainAccess(ProtoEnum):
    """Access a domain grant gives."""

    UNSPECIFIED = 0
    READ = 1
    READ_WRITE = 2


class OperationState(ProtoEnum):
    """State of a long-running operation."""

    UNSPECIFIED = 0
    PENDING = 1
    RUNNING = 2
    SUCCEEDED = 3
    FAILED = 4
    CANCELLED = 5


class TaskOutcome(ProtoEnum):
    """Outcome of a task given to Reflect."""

    UNSPECIFIED = 0
    SUCCESS = 1
    FAILURE = 2
    PARTIAL = 3


class InferMode(ProtoEnum):
    """How LLM extraction runs when Write asks for it."""

    UNSPECIFIED = 0
    ASYNC = 1
    SYNC = 2


class WriteOutcome(ProtoEnum):
    """What Write did with one item (WriteResult.results)."""

    UNSPECIFIED = 0
    CREATED = 1
    MERGED = 2  # a memory stating the same thing was stored: that memory is the one answered
    SUPERSEDED = 3
    NEEDS_CONFIRMATION = 4
    REPLAYED = 5


class PromoteMode(ProtoEnum):
    """What happens to a closed session's working memory."""

    UNSPECIFIED = 0
    PROMOTE = 1
    DISCARD = 2


class AdviceKind(ProtoEnum):
    """What an item of foresight asks of the agent."""

    UNSPECIFIED = 0
    RISK = 1
    RULE = 2
    PREFERENCE = 3


class DecisionSubject(ProtoEnum):
    """What a reflection decision is about."""

    UNSPECIFIED = 0
    TASK = 1
    SESSION = 2
    SEARCH = 3


class DecisionOutcome(ProtoEnum):
    """What was decided."""

    UNSPECIFIED = 0
    RAN = 1
    SKIPPED = 2
    SIGNAL = 3


class ReflectMode(ProtoEnum):
    """How Reflect runs."""

    UNSPECIFIED = 0
    SYNC = 1
    ASYNC = 2


class EraseMode(ProtoEnum):
    """How an erasure of a user runs: unspecified is in the call when small, else as an operation."""

    UNSPECIFIED = 0
    SYNC = 1
    ASYNC = 2


class ContentAction(ProtoEnum):
    """What a write does with a secret or personal data a content detector found."""

    UNSPECIFIED = 0
    OFF = 1
    TAG = 2
    REDACT = 3
    REFUSE = 4


ScopeLike = Union[Scope, str, int]
LayerLike = Union[Layer, str, int]
KindLike = Union[Kind, str, int]
ChangeKindLike = Union[ChangeKind, str, int]
MemoryStatusLike = Union[MemoryStatus, str, int]
RoleLike = Union[Role, str, int]
DomainAccessLike = Union[DomainAccess, str, int]
OperationStateLike = Union[OperationState, str, int]
TaskOutcomeLike = Union[TaskOutcome, str, int]
InferModeLike = Union[InferMode, str, int]
ReflectModeLike = Union[ReflectMode, str, int]
EraseModeLike = Union[EraseMode, str, int]
DecisionSubjectLike = Union[DecisionSubject, str, int]
ContentActionLike = Union[ContentAction, str, int]
