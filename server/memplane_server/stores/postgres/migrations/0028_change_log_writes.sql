-- The change log behind Watch (0007, 0019, 0024) written once per entry instead of three times,
-- for every writer and most of all for a hard forget (issue 14's benchmark, bench/README.md
-- "forget.py": its per-row cost alone was ~1.3x the floor's whole DELETE). Watch's promises stay:
-- one entry per change of a memory, positions in commit order, resume after a position; an
-- erasure leaves no content and no earlier entry's session or entity.
--
-- Before, an entry was (1) inserted with no position, (2) updated at commit to take its position
-- (a new row version in every index: the position is indexed), and, when its memory was erased,
-- (3) updated again to blank its session, entity and history row. Now:
-- - An entry waits for its commit in memory_change_pending (unlogged: it only ever holds rows of
--   transactions in flight, which a crash discards anyway) and is inserted into memory_changes at
--   commit with its position, by the same deferred trigger under the same lock as before.
-- - An entry of a history row holds no session or entity of its own: Watch reads them from the
--   memory's snapshot in that history row, which an erasure deletes (0024's trigger), so nothing
--   is left to blank. An 'erased' entry has no history row and keeps its own (as before, so a
--   Watch filtered by session or entity sees the erasure). An earlier entry's history_seq now
--   names a row that is gone (history seqs are never reused) instead of being set to NULL.
-- - The index by memory only served the blanking, and goes.
CREATE UNLOGGED TABLE memory_change_pending (
    txid         xid8 NOT NULL DEFAULT pg_current_xact_id(),
    -- memory_changes' own id, taken at the change as before: positions follow it at commit.
    id           bigint NOT NULL DEFAULT nextval('memory_changes_id_seq'),
    tenant_id    text NOT NULL,
    memory_id    uuid NOT NULL,
    history_seq  bigint,
    change       text NOT NULL,
    action       text NOT NULL,
    scope        text NOT NULL,
    domain       text,
    agent_id     text,
    kind         text NOT NULL,
    session_id   text,
    entity       text
);
CREATE INDEX memory_change_pending_txid ON memory_change_pending (txid, id);
-- Only the triggers (as the owner) touch it: no grant, no policy.
ALTER TABLE memory_change_pending ENABLE ROW LEVEL SECURITY;

-- The marker (0019) comes with the first pending entry of a transaction.
DROP TRIGGER memory_changes_to_number ON memory_changes;
CREATE TRIGGER memory_change_pending_to_number AFTER INSERT ON memory_change_pending
    FOR EACH STATEMENT EXECUTE FUNCTION mp_changes_to_number();

CREATE OR REPLACE FUNCTION mp_number_change() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    n bigint;
    first bigint;
BEGIN
    -- Held until the commit is visible: the next transaction numbers its rows after this one's.
    PERFORM pg_advisory_xact_lock(1835363696, 1);
    SELECT count(*) INTO n FROM memory_change_pending WHERE txid = NEW.txid;
    IF n > 0 THEN
        -- A block of positions: only this function takes them, under the lock above.
        first := nextval('memory_change_position');
        IF n > 1 THEN
            PERFORM setval('memory_change_position', first + n - 1);
        END IF;
        WITH moved AS (DELETE FROM memory_change_pending WHERE txid = NEW.txid RETURNING *)
        INSERT INTO memory_changes (tenant_id, id, position, memory_id, history_seq, change, action, scope, domain,
                                    agent_id, kind, session_id, entity, changed_at)
            SELECT tenant_id, id, first + row_number() OVER (ORDER BY id) - 1, memory_id, history_seq, change, action,
                   scope, domain, agent_id, kind, session_id, entity, clock_timestamp()
            FROM moved;
        PERFORM pg_notify('memplane_changes', '');
    END IF;
    DELETE FROM memory_change_commits WHERE txid = NEW.txid;
    RETURN NULL;
END
$$;

-- History rows are logged as before (0024), without a subject of their own.
CREATE OR REPLACE FUNCTION mp_record_changes() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    INSERT INTO memory_change_pending (tenant_id, memory_id, history_seq, change, action, scope, domain, agent_id, kind)
        SELECT n.tenant_id, n.memory_id, n.seq, c.what, n.action, m.scope, m.domain, m.agent_id, m.kind
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

-- 0024's DELETE trigger: the 'erased' entries wait for the commit like every other, and the
-- earlier entries need no blanking (their subject was in the history rows deleted here).
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
    INSERT INTO memory_change_pending (tenant_id, memory_id, change, action, scope, domain, agent_id, kind,
                                       session_id, entity)
        SELECT o.tenant_id, o.id, 'erased', 'erased', o.scope, o.domain, o.agent_id, o.kind, o.session_id, o.entity
        FROM old_rows o ORDER BY o.id;
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

-- Entries logged before: their subject is in their history rows too (or, erased, blanked already).
UPDATE memory_changes SET session_id = NULL, entity = NULL
    WHERE change <> 'erased' AND (session_id IS NOT NULL OR entity IS NOT NULL);
DROP INDEX memory_changes_memory;

-- Turn windows (0022's mp_mark_context): a hard forget's batch empties the windows of its
-- sessions' other turns. Its UPDATE joined the (tenant, session) pairs, which the planner did as a
-- hash join over a sequential scan of all of memories (every tenant) at every batch: a cost
-- growing with the table, most often to find nothing (a forget by filter keeps a session's turns
-- in one batch). The same rows, found by the sessions' index (tenant_id, session_id).
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
            WHERE m.tenant_id = ANY (tenant_ids) AND m.session_id = ANY (session_ids)
              AND (m.tenant_id, m.session_id) IN (SELECT * FROM unnest(tenant_ids, session_ids))
              AND m.kind = 'turn' AND m.context_of IS DISTINCT FROM '';
        DELETE FROM session_digests d
            USING unnest(tenant_ids, session_ids) AS s(tenant_id, session_id)
            WHERE d.tenant_id = s.tenant_id AND d.session_id = s.session_id;
    END IF;
END
$$;
