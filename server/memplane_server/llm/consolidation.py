"""The consolidation prompt: one more general memory from a cluster of similar lessons or procedures."""
from __future__ import annotations

from .chat import ChatModel, MalformedOutput, answer_confidence, json_object
from .structured import CONFIDENCE, Expected, obj, string

SYSTEM_PROMPT = """You merge similar lessons or procedures an AI agent learned into one more general one.
Return ONLY a JSON object: {"content": "...", "context": "...", "confidence": 0.0}
- content states the general rule (a lesson) or the general steps (a procedure) that covers every
  input, in one or two sentences, without losing a condition any of them depends on.
- context says when it applies (may be empty); confidence (0 to 1) how well the inputs support it."""


EXPECTED = Expected("consolidation", obj({"content": string(600), "context": string(300), "confidence": CONFIDENCE}),
                    max_tokens=512)


def parse_consolidation(text: str) -> tuple[str, str, float]:
    data = json_object(text)
    content = data.get("content")
    if not isinstance(content, str) or not content.strip():
        raise MalformedOutput("expected an object with non-empty content")
    return content.strip(), str(data.get("context") or "").strip(), answer_confidence(data, 0.8)


async def consolidate(model: ChatModel, kind: str, contents: list[str]) -> tuple[str, str, float]:
    listed = "\n".join(f"- {c}" for c in contents)
    return await model.ask_json(SYSTEM_PROMPT, f"Similar {kind}s:\n{listed}", parse_consolidation, EXPECTED)
