"""When reflection is worth running, decided from the task or the session, with the reason kept.

A task is reflected on when it can teach something: it failed, it succeeded only after retries,
a user said something about it, or nothing like it was reflected on before. A routine success
like earlier ones is skipped: reflecting on it would add near-duplicates, not knowledge.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..write.observations import statement_key
from .reflection import Task

# Cosine between a task's request (as a query) and an earlier task summary above which the task
# is "like an earlier one": with the local embedder the same request scores 0.91-0.93 and other
# tasks 0.80-0.87 (book a flight vs book a hotel: 0.87).
SIMILAR_TASK = 0.9


@dataclass(frozen=True)
class Decision:
    run: bool
    reason: str


def retries(task: Task) -> int:
    """How many times the agent tried again: beyond the attempts it reports, each step repeating
    an earlier step's action."""
    seen: set[str] = set()
    repeated = 0
    for step in task.steps:
        action = statement_key(step.action)
        repeated += action in seen
        seen.add(action)
    return max(task.attempts - 1, 0) + repeated


def task_decision(task: Task, *, like_earlier: bool) -> Decision:
    if task.outcome == "failure":
        return Decision(True, "the task failed")
    if task.feedback.strip():
        return Decision(True, "the task has user feedback")
    if task.outcome in ("success", "partial") and (n := retries(task)):
        return Decision(True, f"the task succeeded after {n} {'retry' if n == 1 else 'retries'}")
    if not like_earlier:
        return Decision(True, "a new kind of task")
    return Decision(False, "a routine success like an earlier task")


def turns_decision(turns: int, at_last: int, every: int) -> Decision | None:
    """A session reflection every `every` turns; None while it is not due."""
    if every and turns - at_last >= every:
        return Decision(True, f"{turns - at_last} turns since the last reflection of the session")
    return None


def task_focus(task: Task) -> list[str]:
    """What the model is asked to look for in this task, from what made it worth reflecting on."""
    focus = []
    if task.outcome == "failure":
        focus.append("The task failed: store at least one lesson saying what to check or avoid next time,"
                     " with the context it applies in.")
    if task.outcome in ("success", "partial") and (n := retries(task)):
        # What failed first is the lesson a similar task needs before it starts (Foresee).
        focus.append(f"The task succeeded after {n} {'retry' if n == 1 else 'retries'}: store a lesson saying"
                     " what to fix or check first next time, and the procedure that finally worked, as concrete steps.")
    if task.feedback.strip():
        focus.append("The user gave feedback: store any preference it expresses as a preference.")
    return focus
