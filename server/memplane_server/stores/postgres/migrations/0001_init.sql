-- Memplane schema v1. Every index is led by tenant_id so the tables can be distributed
-- by tenant later; the HNSW index is the one exception pgvector allows.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE tenants (
    id            text PRIMARY KEY,
    display_name  text NOT NULL DEFAULT '',
    max_memories  bigint NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agents (
    tenant_id     text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    id            text NOT NULL,
    display_name  text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

CREATE TABLE api_keys (
    id            text PRIMARY KEY,
    tenant_id     text REFERENCES tenants(id) ON DELETE CASCADE,
    agent_id      text,
    role          text NOT NULL CHECK (role IN ('platform_admin','tenant_admin','writer','reader','agent')),
    secret_hash   bytea NOT NULL,
    display_name  text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz,
    CHECK ((role = 'platform_admin') = (tenant_id IS NULL)),
    CHECK ((role = 'agent') = (agent_id IS NOT NULL)),
    FOREIGN KEY (tenant_id, agent_id) REFERENCES agents(tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, id);

CREATE TABLE domains (
    name          text PRIMARY KEY,
    description   text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE domain_grants (
    tenant_id     text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    domain        text NOT NULL REFERENCES domains(name) ON DELETE CASCADE,
    can_write     boolean NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, domain)
);
CREATE INDEX domain_grants_domain ON domain_grants (domain, tenant_id);

CREATE TABLE memories (
    tenant_id       text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    id              uuid NOT NULL,
    scope           text NOT NULL CHECK (scope IN ('global','domain','private')),
    domain          text REFERENCES domains(name),
    agent_id        text,
    user_id         text,
    session_id      text,
    layer           text NOT NULL CHECK (layer IN ('episodic','semantic','procedural')),
    kind            text NOT NULL CHECK (kind IN ('turn','event','fact','preference','procedure','lesson','summary')),
    content         text NOT NULL,
    context         text NOT NULL DEFAULT '',
    entity          text,
    attribute       text,
    value           text,
    tags            text[] NOT NULL DEFAULT '{}',
    metadata        jsonb NOT NULL DEFAULT '{}',
    confidence      real NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    status          text NOT NULL CHECK (status IN ('active','pending','superseded','deleted')),
    supersedes      uuid,
    source_type     text,
    source_id       text,
    occurred_at     timestamptz NOT NULL,
    valid_from      timestamptz,
    valid_to        timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    last_used_at    timestamptz,
    use_count       bigint NOT NULL DEFAULT 0,
    embedding       vector(384),
    embedding_model text,
    keywords        tsvector NOT NULL DEFAULT ''::tsvector,
    PRIMARY KEY (tenant_id, id),
    CHECK ((scope = 'domain') = (domain IS NOT NULL)),
    CHECK (scope <> 'private' OR agent_id IS NOT NULL)
);
-- Ids are looked up without knowing the tenant (a domain memory of another tenant), so
-- they are unique on their own too.
CREATE UNIQUE INDEX memories_id ON memories (id);
CREATE INDEX memories_tenant_scope ON memories (tenant_id, scope, agent_id, status, created_at DESC);
CREATE INDEX memories_domain ON memories (domain, status, created_at DESC) WHERE domain IS NOT NULL;
CREATE INDEX memories_tenant_session ON memories (tenant_id, session_id, created_at DESC) WHERE session_id IS NOT NULL;
CREATE INDEX memories_tenant_entity ON memories (tenant_id, entity, attribute) WHERE entity IS NOT NULL;
CREATE INDEX memories_tenant_user ON memories (tenant_id, user_id) WHERE user_id IS NOT NULL;
CREATE INDEX memories_keywords ON memories USING gin (keywords);
CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops);

-- Append-only: every change of a memory, with the row as it was after the change.
CREATE TABLE memory_history (
    tenant_id     text NOT NULL,
    seq           bigserial,
    memory_id     uuid NOT NULL,
    action        text NOT NULL,
    snapshot      jsonb NOT NULL,
    actor         text NOT NULL,
    reason        text NOT NULL DEFAULT '',
    changed_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant_id, seq)
);
CREATE INDEX memory_history_memory ON memory_history (tenant_id, memory_id, seq DESC);
CREATE INDEX memory_history_entity ON memory_history (tenant_id, (snapshot->>'entity'), (snapshot->>'attribute'), seq DESC);

CREATE TABLE jobs (
    tenant_id     text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    id            uuid NOT NULL,
    type          text NOT NULL,
    state         text NOT NULL CHECK (state IN ('pending','running','succeeded','failed','cancelled')),
    payload       jsonb NOT NULL,
    caller        jsonb NOT NULL,
    attempts      int NOT NULL DEFAULT 0,
    run_after     timestamptz NOT NULL DEFAULT now(),
    error_reason  text NOT NULL DEFAULT '',
    error_message text NOT NULL DEFAULT '',
    result        jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX jobs_id ON jobs (id);
CREATE INDEX jobs_ready ON jobs (run_after) WHERE state = 'pending';
CREATE INDEX jobs_tenant_created ON jobs (tenant_id, created_at DESC);

CREATE TABLE audit_events (
    id            bigserial PRIMARY KEY,
    tenant_id     text,
    actor_key_id  text NOT NULL,
    action        text NOT NULL,
    target        text NOT NULL DEFAULT '',
    details       jsonb NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_events_tenant ON audit_events (tenant_id, id DESC);
