-- Reflection is decided, not only requested (issue 13): every decision to reflect or not, and
-- every search that found nothing, is kept with its reason so a missing lesson is explainable.
-- A decision made for an agent is that agent's, as its private memories are.
CREATE TABLE reflection_decisions (
    tenant_id     text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    id            uuid NOT NULL,
    agent_id      text,
    subject_type  text NOT NULL CHECK (subject_type IN ('task', 'session', 'search')),
    subject_id    text NOT NULL DEFAULT '',
    decision      text NOT NULL CHECK (decision IN ('ran', 'skipped', 'signal')),
    reason        text NOT NULL,
    turns         integer,
    operation_id  uuid,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX reflection_decisions_recent ON reflection_decisions (tenant_id, created_at DESC, id DESC);
CREATE INDEX reflection_decisions_subject ON reflection_decisions (tenant_id, subject_type, subject_id, created_at DESC);

GRANT SELECT, INSERT ON reflection_decisions TO memplane_app;
ALTER TABLE reflection_decisions ENABLE ROW LEVEL SECURITY;
CREATE POLICY reflection_decisions_owner ON reflection_decisions FOR ALL TO memplane_app
    USING (tenant_id = mp_tenant() AND (agent_id IS NULL OR agent_id = mp_agent()))
    WITH CHECK (tenant_id = mp_tenant() AND (agent_id IS NULL OR agent_id = mp_agent()));
