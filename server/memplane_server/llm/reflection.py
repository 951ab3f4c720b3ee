"""The reflection prompt: asks a model for typed memories, validates them."""
from __future__ import annotations

from dataclasses import dataclass

from ..core.model import Kind
from .chat import ChatModel, MalformedOutput, answer_confidence, answer_items, answer_kind, json_answer
from .structured import CONFIDENCE, Expected, array, obj, string

ALLOWED_KINDS = frozenset({Kind.PREFERENCE, Kind.FACT, Kind.PROCEDURE, Kind.LESSON})
MAX_ITEMS = 20

SYSTEM_PROMPT = """You distil an AI agent's experience into durable memories.
Return ONLY a JSON object: {"memories": [{"kind": "...", "content": "...", "context": "...", "confidence": 0.0}], "summary": "..."}
- kind is one of: preference (what a user or team likes or wants), fact (something true about the world,
  the user or the system), procedure (how to do a task, as concrete steps), lesson (what to do or avoid
  next time, learned from an outcome).
- content is one self-contained sentence or short paragraph; context says when it applies (may be empty).
- confidence is between 0 and 1: how sure the experience makes you.
- Do not store small talk, opinions about the conversation, or anything not supported by the input.
- summary is two or three sentences about what happened.
At most 20 memories."""


EXPECTED = Expected("reflection", obj({
    "memories": array(obj({"kind": {"type": "string", "enum": sorted(k.value for k in ALLOWED_KINDS)},
                           "content": string(600), "context": string(300), "confidence": CONFIDENCE}), MAX_ITEMS),
    "summary": string(800),
}), max_tokens=2048)


@dataclass(frozen=True)
class ReflectedMemory:
    kind: Kind
    content: str
    context: str
    confidence: float


@dataclass(frozen=True)
class Reflection:
    memories: list[ReflectedMemory]
    summary: str


def parse_reflection(text: str) -> Reflection:
    """Validates the model's JSON answer against the schema; raises MalformedOutput."""
    data = json_answer(text, "memories")
    out = []
    for item in answer_items(data, "memories", MAX_ITEMS):
        kind = answer_kind(item, ALLOWED_KINDS)
        content = item.get("content")
        if not isinstance(content, str) or not content.strip():
            raise MalformedOutput("each memory needs content")
        context = item.get("context") or ""
        out.append(ReflectedMemory(kind, content.strip(), str(context).strip(), answer_confidence(item, 0.8)))
    summary = data.get("summary") or ""
    if not isinstance(summary, str):
        raise MalformedOutput("summary must be a string")
    return Reflection(out, summary.strip())


async def reflect(model: ChatModel, transcript: str) -> Reflection:
    return await model.ask_json(SYSTEM_PROMPT, transcript, parse_reflection, EXPECTED)
