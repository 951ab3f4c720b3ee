"""What Search draws on: the stores its channels read, the model that embeds its query (and the
LLM of its optional stages), and the settings it reads. The composition root fills it
(services/deps.py, `narrowed`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ...core.forget.lifecycle import Clock
from ...llm.chat import ChatModel
from ...llm.embedders import Embedder
from ...stores.postgres.conflicts import ConflictStore
from ...stores.postgres.decisions import DecisionStore
from ...stores.postgres.memories import MemoryStore
from ...stores.postgres.search.digests import DigestStore
from ...stores.postgres.search.entities import EntityStore
from ...stores.postgres.search.feedback import FeedbackStore
from ...stores.redis.working import WorkingStore
from ..content.keys import TenantKeys
from ..content.policies import ContentPolicies


class SearchSettings(Protocol):
    max_query_bytes: int
    search_default_top_k: int
    search_max_top_k: int
    search_candidates: int
    search_dialogue_emotion: str
    search_dialogue_user_only: bool
    search_dialogue_user_turns: int
    context_window: int
    keyword_common_share: float
    channel_weights: dict[str, float]
    recency_lambdas: dict[str, float]
    graph_weight: float
    graph_max_entity_rows: int
    session_weight: float
    session_top_sessions: int
    search_feedback_docs: int
    search_feedback_terms: int
    search_feedback_term_weight: float
    search_feedback_vector: float
    search_rerank: bool
    search_rewrite: bool
    search_llm_timeout_seconds: float


@dataclass(frozen=True)
class SearchDeps:
    settings: SearchSettings
    memories: MemoryStore
    entities: EntityStore  # the graph channel
    digests: DigestStore  # the session channel
    feedback: FeedbackStore  # the second pass
    conflicts: ConflictStore  # explained: a disputed value says so
    decisions: DecisionStore  # a search that found nothing is kept as a signal
    content: ContentPolicies  # ... screened as a write is
    keys: TenantKeys  # ... and sealed
    working: WorkingStore
    embedder: Embedder
    llm: ChatModel | None
    clock: Clock
