"""Content policies: what happens to a memory that holds a secret or personal data, decided per
detector before anything is stored or embedded.

A tenant's policy applies to every write of the tenant; a domain's policy is set by a platform
admin and applies on top of it to memories written into the domain, which every member tenant
reads: for each detector the stricter action of the two wins, so neither can loosen the other.
"""
from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from ..errors import invalid
from .detectors import DETECTORS

CATEGORIES = ("secret", "personal")


class Action(enum.Enum):
    # Declared from the loosest to the strictest: `stricter` compares their positions.
    OFF = "off"
    TAG = "tag"
    REDACT = "redact"
    REFUSE = "refuse"


_STRICTNESS = {action: rank for rank, action in enumerate(Action)}


def stricter(a: Action, b: Action) -> Action:
    return a if _STRICTNESS[a] >= _STRICTNESS[b] else b


# A secret in a memory is a leak waiting for the next search, and a memory rarely needs the key
# itself; personal data is often what a memory is for (the user's own phone number), so by default
# it is kept, tagged and filterable, until the tenant says otherwise. A random-looking token may as
# well be an id an agent needs (a payment id, a document id): tagged unless a rule says more.
TENANT_DEFAULTS: Mapping[str, Action] = {"secret": Action.REDACT, "personal": Action.TAG,
                                         "high_entropy_token": Action.TAG}
# Every member tenant reads a domain: by default nothing a detector finds is stored there in clear.
DOMAIN_DEFAULTS: Mapping[str, Action] = {"secret": Action.REDACT, "personal": Action.REDACT}


@dataclass(frozen=True)
class ContentPolicy:
    """Rules as set, by category or detector name; a detector's own rule overrides its category's,
    and what neither names takes the defaults."""

    rules: Mapping[str, Action] = field(default_factory=dict)
    defaults: Mapping[str, Action] = field(default_factory=lambda: TENANT_DEFAULTS)

    def action(self, detector: str) -> Action:
        category = DETECTORS[detector]
        return (self.rules.get(detector) or self.rules.get(category) or self.defaults.get(detector)
                or self.defaults[category])

    def effective(self) -> dict[str, Action]:
        """Every detector's action, spelled out."""
        return {name: self.action(name) for name in DETECTORS}


def tenant_policy(rules: Mapping[str, Action]) -> ContentPolicy:
    return ContentPolicy(dict(rules), TENANT_DEFAULTS)


def domain_policy(rules: Mapping[str, Action]) -> ContentPolicy:
    return ContentPolicy(dict(rules), DOMAIN_DEFAULTS)


@dataclass(frozen=True)
class Actions:
    """The actions one write applies: the tenant's, and for a domain memory also the domain's."""

    tenant: ContentPolicy
    domains: Mapping[str, ContentPolicy] = field(default_factory=dict)
    # What the server derives (extracted facts, reflections, summaries, promoted working memory)
    # is redacted where a caller's own write would be refused: failing the job would lose the rest
    # of its output and retry into the same refusal, while redaction stores nothing it found.
    derived: bool = False

    def action(self, detector: str, domain: str | None) -> Action:
        own = self.tenant.action(detector)
        if domain is not None:
            own = stricter(own, self.domains.get(domain, domain_policy({})).action(detector))
        return Action.REDACT if self.derived and own is Action.REFUSE else own


def check_rules(rules: Mapping[str, str]) -> dict[str, Action]:
    """Rules as a caller sends them (names to action names); names a detector or category."""
    checked: dict[str, Action] = {}
    for name, action in rules.items():
        if name not in DETECTORS and name not in CATEGORIES:
            raise invalid("UNKNOWN_DETECTOR", f"no detector or category is called {name!r}",
                          known=", ".join([*CATEGORIES, *DETECTORS]))
        try:
            checked[name] = Action(action)
        except ValueError:
            raise invalid("INVALID_CONTENT_ACTION", f"the action for {name} must be one of off, tag, redact, refuse") from None
    return checked


def rules_to_json(rules: Mapping[str, Action]) -> dict[str, str]:
    return {name: action.value for name, action in rules.items()}


def rules_from_json(data: Mapping[str, str]) -> dict[str, Action]:
    # A detector renamed or removed in a later release must not make a stored policy unreadable.
    return {name: Action(action) for name, action in data.items() if name in DETECTORS or name in CATEGORIES}


@dataclass(frozen=True)
class PolicyView:
    """A tenant's or a domain's policy as an admin reads it: the rules as set and every detector's
    action, spelled out."""

    tenant_id: str | None
    domain: str | None
    rules: Mapping[str, Action]
    effective: Mapping[str, Action]
    is_set: bool
    updated_at: datetime | None = None
    updated_by: str = ""
