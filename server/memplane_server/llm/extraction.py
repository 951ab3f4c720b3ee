"""The extraction prompt: from new turns and what is already known about the entities they touch,
the model proposes operations (ADD / UPDATE / DELETE / NOOP) on structured facts."""
from __future__ import annotations

from dataclasses import dataclass

from ..core.model import Kind
from ..core.write.claims import quotes
from .chat import ChatModel, MalformedOutput, answer_confidence, answer_items, answer_kind, json_answer
from .structured import CONFIDENCE, Expected, array, obj, string

OPERATIONS = ("ADD", "UPDATE", "DELETE", "NOOP")
MAX_OPERATIONS = 30
FACT_KINDS = frozenset({Kind.FACT, Kind.PREFERENCE})

SYSTEM_PROMPT = """You maintain an AI agent's memory of facts and preferences about users and the people they mention.
You get KNOWN FACTS (entity.attribute = current value) and NEW TURNS of a conversation, each with an id.
Return ONLY a JSON object {"operations": [...]}: one operation for each lasting fact a new turn states about
a person (home, work, contacts, family, diet, health, plans, likes and dislikes), none for the rest
(the weather, a passing mood, how a day went).
- ADD: a fact not known yet. UPDATE: a new value for a known entity.attribute (keep its entity and attribute
  names; old_value is the known value). DELETE: a turn says a known fact no longer holds or was wrong.
- entity is one word: "user" for the user, or another person by name or relation ("leo", "sister"),
  never "user" for another person's fact; attribute is one word or two joined by "_".
- value: a few words copied from the turn, in its language (a city written 深圳 stays 深圳), never the whole sentence.
- evidence: the words of the turn that state the fact, copied exactly; source_turn: that turn's id.
- Greetings, thanks, questions, requests and small talk state no fact: answer {"operations": []}.
- Times are in the user's time zone (NOW says which); resolve "today", "tomorrow" against NOW.

Examples (their ids, names and places are made up):
KNOWN FACTS: user.city = Berlin
NEW TURNS: [a1] We moved to Munich last month and my son Leo plays the violin now.
{"operations": [{"op": "UPDATE", "kind": "fact", "entity": "user", "attribute": "city", "value": "Munich", "old_value": "Berlin", "content": "The user lives in Munich.", "confidence": 0.9, "source_turn": "a1", "evidence": "We moved to Munich last month"},
 {"op": "ADD", "kind": "fact", "entity": "leo", "attribute": "instrument", "value": "violin", "old_value": "", "content": "The user's son Leo plays the violin.", "confidence": 0.9, "source_turn": "a1", "evidence": "my son Leo plays the violin"}]}
KNOWN FACTS: user.car = Ford
NEW TURNS: [b7] Actually I don't have the Ford any more.
{"operations": [{"op": "DELETE", "kind": "fact", "entity": "user", "attribute": "car", "value": "", "old_value": "Ford", "content": "The user no longer has the Ford.", "confidence": 0.9, "source_turn": "b7", "evidence": "I don't have the Ford any more"}]}
KNOWN FACTS: user.employer = 华为
NEW TURNS: [c2] 我上周换工作了，现在在腾讯做产品经理。
{"operations": [{"op": "UPDATE", "kind": "fact", "entity": "user", "attribute": "employer", "value": "腾讯", "old_value": "华为", "content": "用户在腾讯工作。", "confidence": 0.9, "source_turn": "c2", "evidence": "现在在腾讯"},
 {"op": "ADD", "kind": "fact", "entity": "user", "attribute": "job", "value": "产品经理", "old_value": "", "content": "用户是产品经理。", "confidence": 0.9, "source_turn": "c2", "evidence": "做产品经理"}]}
KNOWN FACTS: user.city = Munich
NEW TURNS: [d4] Thanks, that helps! Can you find me a cafe?
{"operations": []}"""


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
    # The time goes before the fact: after the value, a small model copied it into the value.
    lines = [f"NOW: {now}", "KNOWN FACTS:"]
    lines.extend(f"[updated {f.updated}] {f.entity}.{f.attribute} = {f.value}"
                 for f in sorted(known, key=lambda f: (f.entity, f.attribute)))
    if not known:
        lines.append("(none)")
    if context:
        lines.append("EARLIER TURNS:")
        lines.extend(f"[e{i}] {t.text}" for i, t in enumerate(context, 1))
    lines.append("NEW TURNS:")
    lines.extend(f"[n{i}] {t.text}" for i, t in enumerate(new, 1))
    return "\n".join(lines)


def parse_operations(text: str, new: list[Turn]) -> list[Operation]:
    """Validates the model's answer against the schema; raises MalformedOutput. source_turn becomes
    the id of the new turn that holds the evidence: the one the model names when it does, else the
    only new turn that does; "" when none does (the claim is then dropped as ungrounded)."""
    ids = {f"n{i}": t for i, t in enumerate(new, 1)}
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
        evidence = (fields["evidence"] or "").strip()
        out.append(Operation(op, kind, entity.lower(), attribute.lower(), value, (fields["old_value"] or "").strip(),
                             content, confidence, _source(ids, (fields["source_turn"] or "").strip(), evidence),
                             evidence))
    return out


def _source(ids: dict[str, Turn], named: str, evidence: str) -> str:
    if named in ids and quotes(evidence, ids[named].text):
        return ids[named].id
    holding = [t.id for t in ids.values() if quotes(evidence, t.text)]
    return holding[0] if len(holding) == 1 else (ids[named].id if named in ids else "")


async def extract(
    model: ChatModel, known: list[KnownFact], context: list[Turn], new: list[Turn], now: str
) -> list[Operation]:
    return await model.ask_json(
        SYSTEM_PROMPT, render_input(known, context, new, now), lambda text: parse_operations(text, new), EXPECTED
    )
