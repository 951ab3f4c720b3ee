"""The incremental summary prompt: a stale session summary is rewritten from itself and what
changed since, not from the whole session, so a refresh costs what the change is worth."""
from __future__ import annotations

from ..core.reflection.reflection import SUMMARY_MAX_CHARS
from .chat import ChatModel, MalformedOutput, json_object
from .structured import Expected, obj, string

SYSTEM_PROMPT = f"""You keep a short summary of a conversation session current.
You get the current summary, the statements it made that are no longer true, and what is new or
changed since. Return ONLY a JSON object: {{"summary": "..."}}
- The summary states the goal, the confirmed key facts and the open questions, in at most
  {SUMMARY_MAX_CHARS} characters.
- Drop what is no longer true; keep what still holds; add what is new."""


EXPECTED = Expected("summary", obj({"summary": string(SUMMARY_MAX_CHARS)}), max_tokens=256)


def parse_summary(text: str) -> str:
    summary = json_object(text).get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise MalformedOutput("expected an object with a non-empty summary")
    return summary.strip()[:SUMMARY_MAX_CHARS]


def changes_prompt(previous: str, gone: list[str], changed: list[str]) -> str:
    parts = [f"Current summary:\n{previous}"]
    if gone:
        parts.append("No longer true:\n" + "\n".join(f"- {line}" for line in gone))
    if changed:
        parts.append("New or changed since:\n" + "\n".join(f"- {line}" for line in changed))
    return "\n\n".join(parts)


async def refresh(model: ChatModel, previous: str, gone: list[str], changed: list[str]) -> str:
    return await model.ask_json(SYSTEM_PROMPT, changes_prompt(previous, gone, changed), parse_summary, EXPECTED)
