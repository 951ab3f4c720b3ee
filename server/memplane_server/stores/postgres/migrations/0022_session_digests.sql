-- Session digests (issue 15 item 3): per session and visibility (scope, domain, agent; the groups
-- turn windows are built in, so a digest never carries text a reader of its turns could not
-- read), the session's rarer keyphrases and its entities, as text and keyword tokens, and a
-- vector (the mean of its turns' vectors, or the embedding of a model-written digest). Built by
-- the turn-window worker (services/context.py, services/digests.py) from the session's active
-- turns; the session channel of Search reads them first to choose the sessions worth looking
-- into. A digest is derived data: forgetting or erasing a turn drops its session's digests in the
-- same transaction (mp_mark_context below), and the worker builds them again from what is left;
-- export leaves them out, import marks the sessions for building.
-- No vector or keyword index: a tenant holds one digest per session, orders fewer than its turns,
-- and an exact scan led by tenant_id never walks other tenants' rows (under row-level security a
-- GIN index could not serve `@@` anyway: it is not leakproof).
CREATE TABLE session_digests (
    tenant_id   text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    session_id  text NOT NULL,
    scope       text NOT NULL,
    domain      text NOT NULL DEFAULT '',  -- '' outside domain scope: the key needs a value
    agent_id    text NOT NULL DEFAULT '',  -- '' outside private scope
    keyphrases  text[] NOT NULL DEFAULT '{}',
    entities    text[] NOT NULL DEFAULT '{}',
    digest      text NOT NULL,
    keywords    tsvector NOT NULL DEFAULT ''::tsvector,
    embedding   vector(384),
    turns       int NOT NULL,
    first_at    timestamptz,
    last_at     timestamptz,
    written_by  text NOT NULL DEFAULT '',  -- the chat model that wrote the digest; '' when built without one
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant_id, session_id, scope, domain, agent_id)
);

-- Read as the turns are: global rows by their tenant, domain rows by members of the domain,
-- private rows by their agent. Only the worker (the owner) writes them.
GRANT SELECT ON session_digests TO memplane_app;
ALTER TABLE session_digests ENABLE ROW LEVEL SECURITY;
CREATE POLICY session_digests_read ON session_digests FOR SELECT TO memplane_app USING (
    (scope = 'global' AND tenant_id = mp_tenant())
    OR (scope = 'domain' AND domain = ANY (mp_read_domains()))
    OR (scope = 'private' AND tenant_id = mp_tenant() AND agent_id = mp_agent()));

-- As in 0004, and with clear the sessions' digests are dropped too. The queue row is marked first,
-- so a worker saving a digest (which locks that row and checks its mark: stores/postgres/digests.py)
-- either saves before this drop, which then removes it, or finds the session marked again and
-- saves nothing.
CREATE OR REPLACE FUNCTION mp_mark_context(tenant_ids text[], session_ids text[], clear boolean)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    INSERT INTO context_queue AS q (tenant_id, session_id)
        SELECT DISTINCT s.tenant_id, s.session_id FROM unnest(tenant_ids, session_ids) AS s(tenant_id, session_id)
        WHERE s.session_id IS NOT NULL
        ORDER BY 1, 2  -- one lock order for all writers
        ON CONFLICT (tenant_id, session_id) DO UPDATE SET marked_at = clock_timestamp();
    IF clear THEN
        UPDATE memories m SET context_embedding = NULL, context_keywords = ''::tsvector, context_of = ''
            FROM unnest(tenant_ids, session_ids) AS s(tenant_id, session_id)
            WHERE m.tenant_id = s.tenant_id AND m.session_id = s.session_id
              AND m.kind = 'turn' AND m.context_of IS DISTINCT FROM '';
        DELETE FROM session_digests d
            USING unnest(tenant_ids, session_ids) AS s(tenant_id, session_id)
            WHERE d.tenant_id = s.tenant_id AND d.session_id = s.session_id;
    END IF;
END
$$;

-- Existing sessions get their digests once the worker runs.
INSERT INTO context_queue (tenant_id, session_id)
    SELECT DISTINCT tenant_id, session_id FROM memories
    WHERE session_id IS NOT NULL AND kind = 'turn'
ON CONFLICT (tenant_id, session_id) DO NOTHING;
