"""A dry run of a content policy over stored memories: what it would do to each, had it been in
force when they were written. Nothing is changed; the report is what an admin reads before
setting the policy."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .policy import Action
from .screen import Screened, tag_of

MAX_IDS = 1000


@dataclass
class ScanReport:
    examined: int = 0
    # Memories per (detector, action): a memory with two cards counts once for card_number.
    counts: Counter[tuple[str, Action]] = field(default_factory=Counter)
    # Memories the policy would change, by the strictest change (refuse, redact, tag), and the
    # first MAX_IDS of their ids.
    changes: Counter[Action] = field(default_factory=Counter)
    ids: dict[Action, list[str]] = field(default_factory=dict)

    def add(self, memory_id: str, screened: Screened, tags: tuple[str, ...]) -> None:
        self.examined += 1
        self.counts.update({(h.detector, h.action) for h in screened.hits})
        actions = {h.action for h in screened.hits}
        if Action.REFUSE in actions:
            change = Action.REFUSE
        elif Action.REDACT in actions:
            change = Action.REDACT
        elif any(h.action is Action.TAG and tag_of(h.detector) not in tags for h in screened.hits):
            change = Action.TAG
        else:
            return
        self.changes[change] += 1
        listed = self.ids.setdefault(change, [])
        if len(listed) < MAX_IDS:
            listed.append(memory_id)
