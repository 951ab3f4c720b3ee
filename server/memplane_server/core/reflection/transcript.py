"""What a reflection's model reads: numbered entries (a task's request, steps and feedback, or a
session's memories), so that every memory it proposes can cite the entries it comes from and be
checked against them (core/reflection/faithfulness.py)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..model import MemoryRecord
from .reflection import Task


@dataclass(frozen=True)
class Entry:
    number: int  # as the model sees it: [number]
    label: str  # as kept with a memory that cites it: "request", "step 2", "feedback", or a memory's id
    text: str
    users_words: bool = False  # the request and the feedback: the user's own words, the authority on what they want


def task_entries(task: Task) -> list[Entry]:
    """[0] the request, [1]..[n] the steps (numbered as the agent numbered them), [n+1] the feedback."""
    entries = [Entry(0, "request", task.request, users_words=True)]
    for n, step in enumerate(task.steps, start=1):
        text = step.action + (f"\n    Observation: {step.observation}" if step.observation else "")
        entries.append(Entry(n, f"step {n}", text))
    if task.feedback:
        entries.append(Entry(len(task.steps) + 1, "feedback", task.feedback, users_words=True))
    return entries


def session_entries(records: list[MemoryRecord]) -> list[Entry]:
    """A session's memories, oldest first, numbered from 1."""
    return [Entry(n, str(m.id), f"({m.kind.value}) {m.content}") for n, m in enumerate(records, start=1)]


def _line(e: Entry) -> str:
    title = {"request": "Request", "feedback": "Feedback"}.get(e.label, "Step")
    return f"[{e.number}] {title}: {e.text}"


def task_transcript(task: Task) -> str:
    entries = task_entries(task)
    steps = [_line(e) for e in entries if e.label != "feedback"]
    feedback = [_line(e) for e in entries if e.label == "feedback"]
    return "\n".join([f"Task {task.task_id}", *steps, f"Outcome: {task.outcome}", *feedback])


def session_transcript(entries: list[Entry]) -> str:
    return "\n".join(f"[{e.number}] {e.text}" for e in entries)


# A script that names its language; kana before Han, since Japanese writes both.
_SCRIPTS = (("Japanese", re.compile(r"[\u3040-\u30ff]")), ("Korean", re.compile(r"[\uac00-\ud7af]")),
            ("Chinese", re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")))
_LATIN = re.compile(r"[A-Za-z]+")


def language_line(text: str) -> str:
    """The instruction to write in the language of `text` (a request, a session's turns) when it is
    mostly Chinese, Japanese or Korean; empty otherwise. The 1.5B model wrote English memories for
    Chinese tasks whatever the system prompt said (it follows the prompt's English examples), and
    English lessons are not found before the next Chinese task: the small embedder ranks across
    languages poorly."""
    for language, script in _SCRIPTS:
        if len(script.findall(text)) > len(_LATIN.findall(text)):
            return f"Write every memory and the summary in {language}, the language of the request."
    return ""
