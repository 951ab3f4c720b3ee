-- Windows that keep up (issue 11): a quiet session's windows are averaged from its turns' own
-- vectors at once (no embedding work), then upgraded to an embedding of the window's text when
-- the embedder is idle (services/context.py). This queue holds the sessions with averaged windows
-- left to upgrade. The build queue keeps when a session was first marked, so its backlog can be
-- told in seconds: a later write only moves marked_at.
ALTER TABLE context_queue ADD COLUMN first_marked_at timestamptz NOT NULL DEFAULT clock_timestamp();

CREATE TABLE context_upgrades (
    tenant_id     text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    session_id    text NOT NULL,
    queued_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    leased_until  timestamptz NOT NULL DEFAULT '-infinity',
    PRIMARY KEY (tenant_id, session_id)
);
CREATE INDEX context_upgrades_ready ON context_upgrades (leased_until, queued_at);

-- As the build queue: callers read their own backlog, the worker writes as the owner.
GRANT SELECT ON context_upgrades TO memplane_app;
ALTER TABLE context_upgrades ENABLE ROW LEVEL SECURITY;
CREATE POLICY context_upgrades_tenant ON context_upgrades FOR SELECT TO memplane_app USING (tenant_id = mp_tenant());
