"""Screening one memory against the content policy: every text a memory stores (content, context,
value and the strings inside metadata) is scanned; what a detector finds is left, tagged, replaced
by a typed placeholder, or refuses the write."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..errors import invalid
from ..model import MemoryDraft, ScoreComponent, SearchHit
from .detectors import DETECTORS, find
from .policy import Action, Actions

TAG_PREFIX = "content:"


def placeholder(detector: str) -> str:
    return f"[REDACTED:{detector}]"


def tag_of(detector: str) -> str:
    return TAG_PREFIX + detector


@dataclass(frozen=True)
class Hit:
    field: str
    detector: str
    action: Action


@dataclass(frozen=True)
class Screened:
    draft: MemoryDraft
    hits: list[Hit]

    @property
    def refused(self) -> Hit | None:
        return next((h for h in self.hits if h.action is Action.REFUSE), None)


def refusal(hit: Hit, index: int | None = None) -> Exception:
    """Names the detector and the field, never the text it matched: the error travels to logs and
    clients that must not receive the secret either."""
    extra = {} if index is None else {"index": str(index)}
    return invalid(
        "CONTENT_POLICY",
        f"{hit.field} holds {'a secret' if DETECTORS[hit.detector] == 'secret' else 'personal data'}"
        f" ({hit.detector}) that the content policy refuses",
        detector=hit.detector, field=hit.field, **extra,
    )


class _Scan:
    def __init__(self, actions: Actions, domain: str | None) -> None:
        self.actions = actions
        self.domain = domain
        self.hits: list[Hit] = []

    def text(self, text: str, where: str) -> str:
        out: list[str] = []
        last = 0
        for finding in find(text):
            action = self.actions.action(finding.detector, self.domain)
            if action is Action.OFF:
                continue
            self.hits.append(Hit(where, finding.detector, action))
            if action is Action.REDACT:
                out.append(text[last:finding.start])
                out.append(placeholder(finding.detector))
                last = finding.end
        if last == 0:
            return text
        out.append(text[last:])
        return "".join(out)

    def json(self, value: Any, where: str) -> Any:
        if isinstance(value, str):
            return self.text(value, where)
        if isinstance(value, dict):
            # Keys are names a caller chose; a key holding a secret is as stored as a value.
            return {self.text(k, f"{where} key"): self.json(v, f"{where}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [self.json(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value


def screen(draft: MemoryDraft, actions: Actions) -> Screened:
    """The draft as it may be stored. The domain is the one the write resolved (None outside a
    domain's scope)."""
    scan = _Scan(actions, draft.domain)
    content = scan.text(draft.content, "content")
    context = scan.text(draft.context, "context") if draft.context else draft.context
    value = scan.text(draft.value, "value") if draft.value else draft.value
    metadata = scan.json(draft.metadata, "metadata") if draft.metadata else draft.metadata
    if not scan.hits:
        return Screened(draft, [])
    tags = _with_tags(draft.tags, (h.detector for h in scan.hits if h.action is Action.TAG))
    return Screened(replace(draft, content=content, context=context, value=value, metadata=metadata, tags=tags),
                    scan.hits)


def screen_texts(texts: Mapping[str, str], actions: Actions, domain: str | None) -> ScreenedTexts:
    """Named texts that are not a memory (a Reflect request's task trajectory) as they may be kept:
    redacted where the policy redacts (or refuses, reported in hits); a tag has nothing to go on."""
    scan = _Scan(actions, domain)
    return ScreenedTexts({name: scan.text(text, name) if text else text for name, text in texts.items()}, scan.hits)


@dataclass(frozen=True)
class ScreenedTexts:
    texts: dict[str, str]
    hits: list[Hit]

    @property
    def refused(self) -> Hit | None:
        return next((h for h in self.hits if h.action is Action.REFUSE), None)


def _with_tags(tags: tuple[str, ...], detectors: Iterable[str]) -> tuple[str, ...]:
    added = [tag_of(d) for d in dict.fromkeys(detectors) if tag_of(d) not in tags]
    return (*tags, *added)


def policy_tags(tags: Iterable[str]) -> list[str]:
    """The detectors a stored memory was tagged for."""
    return [t[len(TAG_PREFIX):] for t in tags if t.startswith(TAG_PREFIX) and t[len(TAG_PREFIX):] in DETECTORS]


def explain_tags(hits: Iterable[SearchHit]) -> None:
    """A hit the content policy tagged says so in its explanation: the agent learns that it holds
    personal data or a secret before it repeats it."""
    for hit in hits:
        found = policy_tags(hit.memory.tags)
        if found:
            hit.explanation.append(ScoreComponent(
                "content_policy", 0.0, 0, f"holds what the content policy tags: {', '.join(found)}"))
