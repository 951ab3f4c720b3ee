"""Which models a stage asks, in order: the stage's own (MEMPLANE_LLM_STAGE_MODELS) or the default
one, then the fallbacks (MEMPLANE_LLM_FALLBACK_MODELS) when it fails."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .structured import OutputForm


@dataclass(frozen=True)
class Endpoint:
    """One model at one provider, and how that provider is told the answer's schema."""

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    form: OutputForm = "json_schema"


@dataclass(frozen=True)
class Routing:
    default: Endpoint
    stages: Mapping[str, Endpoint] = field(default_factory=dict)
    fallbacks: tuple[Endpoint, ...] = ()

    def chain(self, stage: str) -> list[Endpoint]:
        """The stage's model first, then each fallback not already in the chain."""
        chain = [self.stages.get(stage, self.default)]
        for endpoint in self.fallbacks:
            if endpoint not in chain:
                chain.append(endpoint)
        return chain
