"""Reflection's pure part: what a task or session reflection is asked (and how it is kept in a
job's payload), what it answers, near-duplicate grouping and the summaries made without a model."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from uuid import UUID

import numpy as np

from ..grouping import close_pairs, connected_groups, parts
from ..model import Kind, MemoryRecord, Scope


@dataclass(frozen=True)
class TaskStep:
    action: str
    observation: str = ""
    occurred_at: datetime | None = None


@dataclass(frozen=True)
class Task:
    task_id: str
    request: str
    steps: tuple[TaskStep, ...] = ()
    outcome: str = "unspecified"
    feedback: str = ""
    used_memory_ids: tuple[str, ...] = ()  # the outcome moves their confidence (core/reflection/confidence.py)
    attempts: int = 1  # how many times the agent tried (core/reflection/triggers.py)


@dataclass(frozen=True)
class ReflectInput:
    task: Task | None = None
    session_id: str | None = None
    user_id: str | None = None
    scope: Scope | None = None
    domain: str | None = None
    mode: str = "auto"  # auto | sync | async
    decide: bool = False  # run only when core/reflection/triggers.py finds it worth it


@dataclass
class ReflectOutcome:
    memories: list[MemoryRecord] = field(default_factory=list)
    summary: str = ""
    merged_count: int = 0
    used_llm: bool = False
    reason: str = ""  # why it ran, or why it was skipped (then nothing was stored)
    skipped: bool = False
    degraded: str = ""  # why it ran without the model's part (then only what needs no model was stored)
    # The model's memories not stored, by why (core/reflection/faithfulness.py): uncited, unfaithful.
    dropped: dict[str, int] = field(default_factory=dict)


def input_to_json(r: ReflectInput) -> dict:
    data = asdict(r)
    data["scope"] = r.scope.value if r.scope else None
    if r.task:
        data["task"]["steps"] = [
            {**asdict(s), "occurred_at": s.occurred_at.isoformat() if s.occurred_at else None} for s in r.task.steps
        ]
    return data


def input_from_json(d: dict) -> ReflectInput:
    task = None
    if d.get("task"):
        t = d["task"]
        steps = tuple(
            TaskStep(s["action"], s["observation"], datetime.fromisoformat(s["occurred_at"]) if s["occurred_at"] else None)
            for s in t["steps"]
        )
        task = Task(t["task_id"], t["request"], steps, t["outcome"], t["feedback"], tuple(t.get("used_memory_ids", ())),
                    t.get("attempts", 1))
    return ReflectInput(task, d.get("session_id"), d.get("user_id"), Scope(d["scope"]) if d.get("scope") else None,
                        d.get("domain"), d.get("mode", "auto"))


def near_duplicate_groups(vectors: np.ndarray, keys: list[tuple], threshold: float) -> list[list[int]]:
    """Indices (oldest first) grouped when cosine >= threshold and their (scope, kind, ...) keys match."""
    return connected_groups(len(vectors), (
        (part[i], part[j]) for part in parts(keys) for _, i, j in close_pairs(vectors[part], threshold)))


SUMMARY_MAX_CHARS = 200


@dataclass(frozen=True)
class SessionSummary:
    text: str
    sources: tuple[UUID, ...]  # the memories it states: when one changes, the summary is stale


def statement(r: MemoryRecord) -> str:
    """A memory as one line of a summary's input: a structured fact as entity.attribute = value."""
    if r.entity:
        return f"{r.entity}{'.' + r.attribute if r.attribute else ''} = {r.value or r.content}"
    return f"{r.kind.value}: {r.content}"


def session_summary(session_id: str, records: list[MemoryRecord]) -> SessionSummary:
    return facts_summary(f"Session {session_id}", records)


def user_summary(user_id: str, records: list[MemoryRecord]) -> SessionSummary:
    """A user's long-term summary: their current facts and preferences across sessions."""
    return facts_summary(f"User {user_id}", records)


def facts_summary(title: str, records: list[MemoryRecord]) -> SessionSummary:
    """The current facts and preferences among records in at most SUMMARY_MAX_CHARS characters:
    short enough to read at a glance and to be rebuilt whenever one of them changes."""
    facts = [r for r in records if r.kind in (Kind.FACT, Kind.PREFERENCE)]
    structured = sorted({(r.entity, r.attribute): r for r in facts if r.entity}.values(), key=lambda r: (r.entity, r.attribute or ""))
    lines = [(r, f"- {statement(r)}") for r in structured]
    lines += [(r, f"- {statement(r)}") for r in facts if not r.entity]
    text = f"{title}: {len(records)} active memories."
    if not lines:
        return SessionSummary(f"{text}\nNo facts or preferences recorded yet.", ())
    stated: list[UUID] = []
    for n, (r, line) in enumerate(lines):
        after = len(lines) - n - 1
        tail = f"\n- (+{after} more)" if after else ""
        room = SUMMARY_MAX_CHARS - len(text) - 1 - len(tail)
        if len(line) <= room:
            text += "\n" + line
            stated.append(r.stored_id)
        elif not stated and room >= 20:  # one long first fact is shortened rather than left out
            return SessionSummary(f"{text}\n{line[:room - 1]}…{tail}", (r.stored_id,))
        else:
            return SessionSummary(f"{text}\n- (+{len(lines) - n} more)"[:SUMMARY_MAX_CHARS], tuple(stated))
    return SessionSummary(text[:SUMMARY_MAX_CHARS], tuple(stated))


def task_summary(task: Task) -> str:
    text = f"Task {task.task_id} ({task.outcome}): {task.request} — {len(task.steps)} steps."
    if task.feedback:
        text += f" Feedback: {task.feedback}"
    return text
