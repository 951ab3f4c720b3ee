-- Hard forgets at scale (issue 14's benchmark, bench/README.md "forget.py"): a deleted memory's
-- history, source links and Watch event, once per DELETE statement, in its trigger, instead of
-- by each caller and row by row. The same guarantees: no history row and no link of an erased
-- memory stays, and its change-log entry ('erased', numbered at commit: Watch readers see one per
-- memory, in commit order) is written in the same transaction while its earlier entries lose
-- their details.
--
-- What goes: the 'erased' history row every erased memory got. It existed only so that the
-- history trigger (0007, 0019) logged the change; no reader could see it (History reads through
-- the memory, which is gone), and writing it cost a row version in memory_history and its indexes
-- per memory. The change-log entry now comes straight from the deleted rows.
--
-- The foreign key memory_sources -> memories (0009) goes too: its ON DELETE CASCADE ran one
-- query per deleted row; the statement trigger deletes the rows' links in one. Links are only
-- written with their derived memory, in its transaction (stores/postgres/memory_writes.py).
ALTER TABLE memory_sources DROP CONSTRAINT memory_sources_tenant_id_memory_id_fkey;

CREATE OR REPLACE FUNCTION mp_stale_on_delete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    gone uuid[];
    tenant_ids text[];
BEGIN
    SELECT coalesce(array_agg(id), '{}'), coalesce(array_agg(DISTINCT tenant_id), '{}') INTO gone, tenant_ids
        FROM old_rows;
    -- By the ids' indexes (an id is unique across tenants), as the callers' statements were.
    DELETE FROM memory_history h WHERE h.tenant_id = ANY (tenant_ids) AND h.memory_id = ANY (gone);
    DELETE FROM memory_sources s WHERE s.tenant_id = ANY (tenant_ids) AND s.memory_id = ANY (gone);
    -- The Watch event of each erased row, in id order (as the callers listed them).
    INSERT INTO memory_changes (tenant_id, memory_id, history_seq, change, action, scope, domain, agent_id,
                                kind, session_id, entity)
        SELECT o.tenant_id, o.id, NULL, 'erased', 'erased', o.scope, o.domain, o.agent_id, o.kind, o.session_id,
               o.entity
        FROM old_rows o ORDER BY o.id;
    -- Earlier entries of the memory keep only what visibility needs.
    UPDATE memory_changes c SET session_id = NULL, entity = NULL, history_seq = NULL
        WHERE c.tenant_id = ANY (tenant_ids) AND c.memory_id = ANY (gone) AND c.change <> 'erased'
          AND (c.session_id IS NOT NULL OR c.entity IS NOT NULL OR c.history_seq IS NOT NULL);
    PERFORM mp_erase_derived(gone);
    DELETE FROM memory_sources s WHERE s.source_id = ANY (gone);
    PERFORM mp_scrub_jobs(tenant_ids, (SELECT array_agg(id::text) FROM old_rows));
    -- Term counts (keyword_stats, migration 0013) list a tenant's common terms, which in a small
    -- tenant are any of its words: dropped, so the background work counts them again without
    -- the erased text (until then every term counts as rare).
    DELETE FROM keyword_stats k WHERE k.tenant_id = ANY (tenant_ids);
    -- Recorded write requests (write_requests) hold ids, never content, and answer a repeat with
    -- the memories that still exist; cleaning them here would scan a tenant's day of writes on
    -- every delete, so only an erasure of a user does.
    RETURN NULL;
END
$$;

-- Hard cascade, one level (deleting the derived rows fires the trigger above again for the next,
-- which erases their history and logs them).
CREATE OR REPLACE FUNCTION mp_erase_derived(source_ids uuid[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    tenant_ids text[];
    ids uuid[];
BEGIN
    SELECT coalesce(array_agg(x.tenant_id), '{}'), coalesce(array_agg(x.memory_id), '{}') INTO tenant_ids, ids
        FROM (SELECT DISTINCT s.tenant_id, s.memory_id FROM memory_sources s
              WHERE s.source_id = ANY (source_ids) AND NOT (s.memory_id = ANY (source_ids))) x;
    IF cardinality(ids) = 0 THEN
        RETURN;
    END IF;
    -- The session's (or user's) current summary is rebuilt from what the session (or the user's
    -- memories) hold now. The job names the session or user, since the summary it replaces is
    -- gone; an erasure of a user removes the jobs about that user afterwards.
    INSERT INTO jobs (tenant_id, id, type, state, payload, caller)
        SELECT m.tenant_id, gen_random_uuid(), 'refresh_summary', 'pending',
               jsonb_build_object('summary_id', m.id, 'erased', true, 'source_type', m.source_type,
                                  'session_id', m.session_id, 'user_id', m.user_id, 'scope', m.scope,
                                  'domain', m.domain),
               jsonb_build_object('key_id', 'system:refresh', 'role', 'writer', 'tenant_id', m.tenant_id,
                                  'agent_id', m.agent_id,
                                  'domains', CASE WHEN m.domain IS NULL THEN '{}'::jsonb
                                                  ELSE jsonb_build_object(m.domain, true) END)
        FROM unnest(tenant_ids, ids) AS e(tenant_id, id)
        JOIN memories m ON m.tenant_id = e.tenant_id AND m.id = e.id
        JOIN tenants t ON t.id = m.tenant_id
        WHERE m.kind = 'summary' AND m.status IN ('active', 'stale', 'pending')
          AND ((m.source_type = 'session' AND m.session_id IS NOT NULL)
               OR (m.source_type = 'user' AND m.user_id IS NOT NULL));
    DELETE FROM memories m USING unnest(tenant_ids, ids) AS e(tenant_id, id)
        WHERE m.tenant_id = e.tenant_id AND m.id = e.id;
END
$$;

-- History rows are logged as before (0019); an 'erased' one is no longer written.
CREATE OR REPLACE FUNCTION mp_record_changes() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    INSERT INTO memory_changes (tenant_id, memory_id, history_seq, change, action, scope, domain, agent_id,
                                kind, session_id, entity)
        SELECT n.tenant_id, n.memory_id, n.seq, c.what,
               n.action, m.scope, m.domain, m.agent_id, m.kind, m.session_id, m.entity
        FROM new_rows n
        CROSS JOIN LATERAL (SELECT CASE n.action
            WHEN 'created' THEN 'created'
            WHEN 'superseded' THEN 'superseded'
            WHEN 'merged' THEN 'superseded'
            WHEN 'deleted' THEN 'forgotten'
            WHEN 'stale' THEN 'summary_stale'
            ELSE 'updated' END AS what) c
        -- History of a memory that is gone already: nothing a reader could see.
        JOIN memories m ON m.tenant_id = n.tenant_id AND m.id = n.memory_id
        ORDER BY n.seq;
    RETURN NULL;
END
$$;

-- What was derived from a batch of forgotten memories, level by level, each level by the links'
-- and the rows' indexes. As one recursive query (0010, 0019) the planner expected tens of
-- thousands of rows from the recursion and hashed every link and every row of the tenants it
-- read, at each batch: a cost growing with the table, not with the batch (bench/README.md).
CREATE OR REPLACE FUNCTION mp_derived(source_ids uuid[])
RETURNS TABLE (tenant_id text, id uuid, kind text, status text, session_id text, user_id text, content text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public AS $$
DECLARE
    frontier uuid[] := source_ids;
    reached uuid[] := '{}';
    found uuid[];
BEGIN
    LOOP
        SELECT coalesce(array_agg(DISTINCT s.memory_id), '{}') INTO found
            FROM memory_sources s
            WHERE s.source_id = ANY (frontier) AND NOT (s.memory_id = ANY (source_ids))
              AND NOT (s.memory_id = ANY (reached));
        EXIT WHEN cardinality(found) = 0;
        reached := reached || found;
        frontier := found;
    END LOOP;
    RETURN QUERY SELECT m.tenant_id, m.id, m.kind, m.status, m.session_id, m.user_id, m.content
        FROM memories m WHERE m.id = ANY (reached);
END
$$;
