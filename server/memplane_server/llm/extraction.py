"""The extraction prompt: from new turns and what is already known about the entities they touch,
the model proposes operations (ADD / UPDATE / DELETE / NOOP) on structured facts."""
from __future__ import annotations

from dataclasses import dataclass

from ..core.model import Kind
from .chat import ChatModel, MalformedOutput, answer_confidence, answer_items, answer_kind, json_answer
from .structured import CONFIDENCE, Expected, array, obj, string

OPERATIONS = ("ADD", "UPDATE", "DELETE", "NOOP")
MAX_OPERATIONS = 30
FACT_KINDS = frozenset({Kind.FACT, Kind.PREFERENCE})

SYSTEM_PROMPT = """You maintain an AI agent's memory of facts and preferences about users and the world.
You get KNOWN FACTS (grouped by entity, with the current value and when it was last updated) and
NEW TURNS of a conversation, each with an id. Decide what the new turns change.
Return ONLY a JSON object: {"operations": [{"op": "ADD|UPDATE|DELETE|NOOP", "kind": "fact|preference",
"entity": "...", "attribute": "...", "value": "...", "old_value": "...", "content": "...",
"confidence": 0.0, "source_turn": "...", "evidence": "..."}]}
- ADD a fact or preference that is not known yet; UPDATE when a turn gives a new value for a known
  entity/attribute (old_value is the known value); DELETE when a turn says a known fact no longer holds;
  NOOP when a turn repeats what is known.
- Resolve references ("change it to the new one", "no, back to the old one") against the known facts and
  earlier turns. Use short lowercase entity and attribute names, e.g. entity "user", attribute "address".
- value is copied from the turns or the known facts in their own words and language (a city written
  深圳 stays 深圳); content may rephrase it.
- content is one self-contained sentence stating the fact with its value.
- Do not store small talk, greetings, questions, or opinions about the conversation.
- confidence between 0 and 1; source_turn is the id of the new turn the operation comes from, and
  evidence the exact words of that turn that state it, copied. An operation without them is ignored.
- Times are given in the user's time zone (NOW says which); resolve "today", "tomorrow" against NOW."""


EXPECTED = Expected("operations", obj({"operations": array(obj({
    "op": {"type": "string", "enum": list(OPERATIONS)},
    "kind": {"type": "string", "enum": sorted(k.value for k in FACT_KINDS)},
    "entity": string(80), "attribute": string(80), "value": string(300), "old_value": string(300),
    "content": string(500), "confidence": CONFIDENCE, "source_turn": string(80), "evidence": string(300),
}), MAX_OPERATIONS)}), max_tokens=2048)


@dataclass(frozen=True)
class KnownFact:
    entity: str
    attribute: str
    value: str
    updated: str  # ISO time of the last change


@dataclass(frozen=True)
class Turn:
    id: str
    text: str


@dataclass(frozen=True)
class Operation:
    op: str
    kind: Kind
    entity: str
    attribute: str
    value: str
    old_value: str
    content: str
    confidence: float
    source_turn: str
    evidence: str


def render_input(known: list[KnownFact], context: list[Turn], new: list[Turn], now: str) -> str:
    grouped: dict[str, list[KnownFact]] = {}
    for fact in known:
        grouped.setdefault(fact.entity, []).append(fact)
    lines = [f"NOW: {now}", "KNOWN FACTS:"]
    for entity, facts in sorted(grouped.items()):
        lines.append(f"- {entity}:")
        lines.extend(f"    {f.attribute} = {f.value} (updated {f.updated})" for f in facts)
    if not known:
        lines.append("(none)")
    if context:
        lines.append("EARLIER TURNS:")
        lines.extend(f"[{t.id}] {t.text}" for t in context)
    lines.append("NEW TURNS:")
    lines.extend(f"[{t.id}] {t.text}" for t in new)
    return "\n".join(lines)


def parse_operations(text: str, turn_ids: set[str]) -> list[Operation]:
    """Validates the model's answer against the schema; raises MalformedOutput."""
    out = []
    for item in answer_items(json_answer(text, "operations"), "operations", MAX_OPERATIONS):
        op = str(item.get("op", "")).upper()
        if op not in OPERATIONS:
            raise MalformedOutput(f"unknown op {item.get('op')!r}")
        if op == "NOOP":
            continue
        fields = {k: item.get(k)
                  for k in ("entity", "attribute", "value", "old_value", "content", "source_turn", "evidence")}
        if any(v is not None and not isinstance(v, str) for v in fields.values()):
            raise MalformedOutput("entity, attribute, value, old_value, content, source_turn and evidence are strings")
        entity, attribute = (fields["entity"] or "").strip(), (fields["attribute"] or "").strip()
        if not entity or not attribute:
            raise MalformedOutput(f"{op} needs an entity and an attribute")
        value, content = (fields["value"] or "").strip(), (fields["content"] or "").strip()
        if op != "DELETE" and (not value or not content):
            raise MalformedOutput(f"{op} needs a value and content")
        kind = answer_kind(item, FACT_KINDS, default="fact")
        confidence = answer_confidence(item, 0.9)
        source = (fields["source_turn"] or "").strip()
        if source and source not in turn_ids:
            raise MalformedOutput(f"source_turn {source!r} is not one of the new turns")
        out.append(Operation(op, kind, entity.lower(), attribute.lower(), value, (fields["old_value"] or "").strip(),
                             content, confidence, source, (fields["evidence"] or "").strip()))
    return out


async def extract(
    model: ChatModel, known: list[KnownFact], context: list[Turn], new: list[Turn], now: str
) -> list[Operation]:
    ids = {t.id for t in new}
    return await model.ask_json(
        SYSTEM_PROMPT, render_input(known, context, new, now), lambda text: parse_operations(text, ids), EXPECTED
    )
