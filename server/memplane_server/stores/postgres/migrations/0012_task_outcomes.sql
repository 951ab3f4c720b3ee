-- A task's outcome moves each memory it used once (issue 13): the same outcome reported again,
-- by a retried reflection job or a repeated SubmitFeedback, changes nothing. The memory may be a
-- domain memory of another tenant, so it is named by id without a foreign key.
CREATE TABLE task_outcomes (
    tenant_id    text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    task_id      text NOT NULL,
    memory_id    uuid NOT NULL,
    outcome      text NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, task_id, memory_id)
);
GRANT SELECT, INSERT ON task_outcomes TO memplane_app;
ALTER TABLE task_outcomes ENABLE ROW LEVEL SECURITY;
CREATE POLICY task_outcomes_tenant ON task_outcomes FOR ALL TO memplane_app
    USING (tenant_id = mp_tenant()) WITH CHECK (tenant_id = mp_tenant());
