"""Foresight's pure part: which searched lessons, procedures and preferences apply to a planned
task, and why.

Search ranks every candidate; foresight keeps only those with evidence, because advice that does
not apply is noise an agent will act on. Evidence is a named entity or tool in the memory, a
shared keyword, or closeness to the task near the best match's: absolute cosines of the local
embedder are compressed (unrelated lessons score 0.80 against a task whose right lesson scores
0.84), so closeness counts only within CLOSE_TO_BEST of the closest.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..model import Kind, SearchHit

CLOSE_TO_BEST = 0.03
ADVICE_KINDS = {Kind.LESSON: "risk", Kind.PROCEDURE: "rule", Kind.PREFERENCE: "preference"}


@dataclass(frozen=True)
class Advice:
    hit: SearchHit
    kind: str  # risk | rule | preference
    why: str


def plan_text(task: str, entities: list[str], tools: list[str]) -> str:
    """The search text for a planned task: the task, then what it involves."""
    parts = [task.strip()]
    if entities:
        parts.append("involving " + ", ".join(entities))
    if tools:
        parts.append("using " + ", ".join(tools))
    return "; ".join(parts)


def _mentions(hit: SearchHit, names: list[str]) -> list[str]:
    m = hit.memory
    text = " ".join(filter(None, (m.content, m.context, m.entity, m.value, " ".join(m.tags)))).casefold()
    return [n for n in names if n.strip() and n.casefold() in text]


def advice_for(hits: list[SearchHit], entities: list[str], tools: list[str]) -> list[Advice]:
    """The hits (searched with explain) that apply, in their order, each with its reasons."""
    closeness = {id(h): next((c for c in h.explanation if c.name == "vector"), None) for h in hits}
    best = max((c.value for c in closeness.values() if c is not None), default=None)
    out = []
    for hit in hits:
        kind = ADVICE_KINDS.get(hit.memory.kind)
        if kind is None:
            continue
        reasons = []
        vector = closeness[id(hit)]
        if vector is not None and best is not None and vector.value >= best - CLOSE_TO_BEST:
            reasons.append(f"close to the task (cosine {vector.value:.2f}, #{vector.rank})")
        if any(c.name == "keyword" for c in hit.explanation):
            reasons.append("shares its words")
        if named := _mentions(hit, entities):
            reasons.append("names " + ", ".join(named))
        if used := _mentions(hit, tools):
            reasons.append("names tool " + ", ".join(used))
        if reasons:
            out.append(Advice(hit, kind, "; ".join(reasons)))
    return out
