-- Summaries that never lie (issue 13): a summary records the memories it was built from, and the
-- moment one of them is superseded, changed or forgotten the summary turns 'stale' in the same
-- transaction (out of default search) and a job to rebuild it is queued with it.
--
-- A trigger rather than the application: every path that changes a memory (supersede, merge,
-- update, forget, hard delete, paths added later) is covered without each remembering to, and it
-- runs as the owner, so a summary the changing caller may not write (another agent's, or one in
-- a domain it only reads) still turns stale.
ALTER TABLE memories DROP CONSTRAINT memories_status_check;
ALTER TABLE memories ADD CONSTRAINT memories_status_check
    CHECK (status IN ('active','pending','superseded','deleted','stale'));

-- Derived memory -> source memory. Sources may belong to another tenant (a domain memory), so
-- they are looked up by id alone.
CREATE TABLE memory_sources (
    tenant_id   text NOT NULL,
    memory_id   uuid NOT NULL,
    source_id   uuid NOT NULL,
    PRIMARY KEY (tenant_id, memory_id, source_id),
    FOREIGN KEY (tenant_id, memory_id) REFERENCES memories (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX memory_sources_source ON memory_sources (source_id);

GRANT SELECT, INSERT ON memory_sources TO memplane_app;
ALTER TABLE memory_sources ENABLE ROW LEVEL SECURITY;
CREATE POLICY memory_sources_tenant ON memory_sources FOR ALL TO memplane_app
    USING (tenant_id = mp_tenant()) WITH CHECK (tenant_id = mp_tenant());

-- Marks the active memories derived from these sources stale, logs it, and queues their rebuild.
CREATE FUNCTION mp_mark_stale(sources uuid[], what text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
    WITH staled AS (
        UPDATE memories m SET status = 'stale', updated_at = clock_timestamp()
            FROM (SELECT DISTINCT ON (tenant_id, memory_id) tenant_id, memory_id, source_id
                  FROM memory_sources WHERE source_id = ANY (sources)
                  ORDER BY tenant_id, memory_id, source_id) s
            WHERE m.tenant_id = s.tenant_id AND m.id = s.memory_id AND m.status = 'active'
              AND m.kind = 'summary'  -- only summaries are rebuilt; 0010 forgets other derived memories
            RETURNING m.*, s.source_id AS changed_source
    ), logged AS (
        INSERT INTO memory_history (tenant_id, memory_id, action, snapshot, actor, reason)
            SELECT tenant_id, id, 'stale',
                   to_jsonb(staled) - 'embedding' - 'context_embedding' - 'keywords' - 'context_keywords'
                       - 'context_of' - 'changed_source',
                   'system', format('source %s was %s', changed_source, what)
            FROM staled
    )
    -- The rebuild runs as the summary's own owner: its tenant, its agent, its domain.
    INSERT INTO jobs (tenant_id, id, type, state, payload, caller)
        SELECT tenant_id, gen_random_uuid(), 'refresh_summary', 'pending',
               jsonb_build_object('summary_id', id),
               jsonb_build_object('key_id', 'system:refresh', 'role', 'writer', 'tenant_id', tenant_id,
                                  'agent_id', agent_id,
                                  'domains', CASE WHEN domain IS NULL THEN '{}'::jsonb
                                                  ELSE jsonb_build_object(domain, true) END)
        FROM staled;
$$;

CREATE FUNCTION mp_stale_on_change() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    PERFORM mp_mark_stale(ARRAY[OLD.id],
                          CASE WHEN NEW.status IS DISTINCT FROM OLD.status THEN NEW.status ELSE 'updated' END);
    RETURN NULL;
END
$$;
-- Row by row, but only for the changes that can make a summary wrong: the WHEN is checked
-- without calling the function, so the frequent updates (usage counters, turn windows) cost nothing.
CREATE TRIGGER memories_stale_on_change AFTER UPDATE ON memories FOR EACH ROW
    WHEN (OLD.status IN ('active', 'pending') AND (
        NEW.status IS DISTINCT FROM OLD.status OR NEW.content IS DISTINCT FROM OLD.content
        OR NEW.value IS DISTINCT FROM OLD.value OR NEW.entity IS DISTINCT FROM OLD.entity
        OR NEW.attribute IS DISTINCT FROM OLD.attribute))
    EXECUTE FUNCTION mp_stale_on_change();

-- Hard deletes in one statement each (a forget by filter may remove many rows at once).
CREATE FUNCTION mp_stale_on_delete() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    PERFORM mp_mark_stale(
        (SELECT coalesce(array_agg(id), '{}') FROM old_rows WHERE status IN ('active', 'pending')), 'forgotten');
    DELETE FROM memory_sources s USING old_rows o WHERE s.source_id = o.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_stale_on_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION mp_stale_on_delete();
