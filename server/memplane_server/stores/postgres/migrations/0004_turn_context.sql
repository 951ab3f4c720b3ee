-- Context for short turns: a turn of a session is also indexed as a window of its
-- neighbouring turns, because the answer to a question is often in the reply, not in the
-- turn that names the topic. Windows are built in the background (services/context.py);
-- context_of is a fingerprint of the window text and model they were built from.
-- (The 384 follows the embedding column; a model of another size needs both changed.)
ALTER TABLE memories
    ADD COLUMN context_embedding vector(384),
    ADD COLUMN context_keywords tsvector NOT NULL DEFAULT ''::tsvector,
    ADD COLUMN context_of text;
CREATE INDEX memories_context_embedding ON memories USING hnsw (context_embedding vector_cosine_ops);

-- Sessions whose windows must be (re)built. A write marks its sessions; the worker takes the
-- oldest mark and removes it only if no write marked the session again meanwhile.
CREATE TABLE context_queue (
    tenant_id     text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    session_id    text NOT NULL,
    marked_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    leased_until  timestamptz NOT NULL DEFAULT '-infinity',
    PRIMARY KEY (tenant_id, session_id)
);
CREATE INDEX context_queue_ready ON context_queue (leased_until, marked_at);

-- Callers read their own backlog; marks are made through the function below, which runs as
-- the owner because a member tenant may change another tenant's domain turns.
GRANT SELECT ON context_queue TO memplane_app;
ALTER TABLE context_queue ENABLE ROW LEVEL SECURITY;
CREATE POLICY context_queue_tenant ON context_queue FOR SELECT TO memplane_app USING (tenant_id = mp_tenant());

-- Marks sessions for rebuilding. With clear, their windows are emptied at once: a window that
-- still held a forgotten or changed turn's text must not match a search meanwhile. Cleared
-- rows get the fingerprint '', so a worker that read the session before cannot save the old
-- window over them (it saves only where the fingerprint is still the one it read).
CREATE FUNCTION mp_mark_context(tenant_ids text[], session_ids text[], clear boolean)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF clear THEN
        UPDATE memories m SET context_embedding = NULL, context_keywords = ''::tsvector, context_of = ''
            FROM unnest(tenant_ids, session_ids) AS s(tenant_id, session_id)
            WHERE m.tenant_id = s.tenant_id AND m.session_id = s.session_id
              AND m.kind = 'turn' AND m.context_of IS DISTINCT FROM '';
    END IF;
    INSERT INTO context_queue AS q (tenant_id, session_id)
        SELECT DISTINCT s.tenant_id, s.session_id FROM unnest(tenant_ids, session_ids) AS s(tenant_id, session_id)
        WHERE s.session_id IS NOT NULL
        ORDER BY 1, 2  -- one lock order for all writers
        ON CONFLICT (tenant_id, session_id) DO UPDATE SET marked_at = clock_timestamp();
END
$$;
REVOKE ALL ON FUNCTION mp_mark_context(text[], text[], boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mp_mark_context(text[], text[], boolean) TO memplane_app;

-- Existing sessions get their windows once the worker runs.
INSERT INTO context_queue (tenant_id, session_id)
    SELECT DISTINCT tenant_id, session_id FROM memories
    WHERE session_id IS NOT NULL AND kind = 'turn';
