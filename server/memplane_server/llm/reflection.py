"""The reflection prompt: asks a model for typed memories, validates them."""
from __future__ import annotations

from dataclasses import dataclass

from ..core.model import Kind
from .chat import ChatModel, MalformedOutput, answer_confidence, answer_items, answer_kind, json_answer
from .structured import CONFIDENCE, Expected, array, obj, string

ALLOWED_KINDS = frozenset({Kind.PREFERENCE, Kind.FACT, Kind.PROCEDURE, Kind.LESSON})
MAX_ITEMS = 20

# Short and concrete for a small model: what each kind is, one good lesson, the bad ones it writes
# otherwise. Whatever it writes anyway is checked against the entries it cites (core/reflection/faithfulness.py).
SYSTEM_PROMPT = """You turn an AI agent's finished task (or a session) into memories for next time.
The input is numbered: [0] the request, then each step with what it observed, then the user's feedback.
Return ONLY a JSON object: {"memories": [{"kind": "lesson", "content": "...", "context": "...", "confidence": 0.9, "steps": [1, 2]}], "summary": "..."}
Kinds:
- lesson: what to check or do differently next time, learned from a failure or a retry.
- procedure: the steps that worked, written as instructions.
- preference: what the user wants or refuses.
- fact: something true about the user, the world or the system.
Rules:
- steps: the numbers of every entry the memory comes from. A memory without them is thrown away.
- Keep the meaning exactly: "never" stays "never", "not" stays "not", "before" stays "before"; 不 and 从不 stay.
- Use only names and numbers found in the entries you cite; do not count retries or steps.
- content is one sentence of advice or truth, not a story; context says when it applies (may be empty).
- Write content, context and summary in the language of the request [0]: a Chinese request gets Chinese memories.
Good lesson: "Next time, renew the ledger-sync token before running the nightly import."
Bad lesson: "First I called run_import, then I retried it." (a story of the steps)
Bad lesson: "{\"tool\": \"run_import\", \"args\": {}}" (a tool call)
summary: two sentences on what happened. Usually 1 to 5 memories, at most 20."""


MAX_CITED = 8  # a memory comes from a few entries; more is a model listing everything

EXPECTED = Expected("reflection", obj({
    "memories": array(obj({"kind": {"type": "string", "enum": sorted(k.value for k in ALLOWED_KINDS)},
                           "content": string(600), "context": string(300), "confidence": CONFIDENCE,
                           "steps": array({"type": "integer", "minimum": 0}, MAX_CITED)}), MAX_ITEMS),
    "summary": string(800),
}), max_tokens=2048)


@dataclass(frozen=True)
class ReflectedMemory:
    kind: Kind
    content: str
    context: str
    confidence: float
    steps: tuple[int, ...] = ()  # the entries it cites; -1 for one that is not an entry's number


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
        out.append(ReflectedMemory(kind, content.strip(), str(context).strip(), answer_confidence(item, 0.8),
                                   _cited(item.get("steps"))))
    summary = data.get("summary") or ""
    if not isinstance(summary, str):
        raise MalformedOutput("summary must be a string")
    return Reflection(out, summary.strip())


def _cited(steps: object) -> tuple[int, ...]:
    """The entry numbers a memory cites. A citation that is not a number does not fail the whole
    answer: it cites no entry (-1), and only that memory is dropped (core/reflection/faithfulness.py)."""
    if not isinstance(steps, list):
        return ()
    return tuple(n if isinstance(n, int) and not isinstance(n, bool)
                 else int(n) if isinstance(n, str) and n.strip().isdigit() else -1 for n in steps[:MAX_CITED])


async def reflect(model: ChatModel, transcript: str) -> Reflection:
    return await model.ask_json(SYSTEM_PROMPT, transcript, parse_reflection, EXPECTED)
