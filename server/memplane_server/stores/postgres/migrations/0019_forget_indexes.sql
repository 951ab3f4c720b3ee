-- Forgetting many memories at once (issue 14's benchmark: 100,000 by filter). The triggers of
-- 0007, 0009 and 0010 did their work row by row: a soft forget ran two SQL functions (planned
-- again on every call) for every forgotten row, and every history row recorded its change and,
-- at commit, numbered it, one statement each. Here the same work is done once per statement (and
-- the numbering once per transaction), with the same results.

-- Change log (0007): one INSERT (and, for erasures, one UPDATE) per history statement. The
-- entries are inserted in history order, so their ids (and then their positions) keep it.
CREATE FUNCTION mp_record_changes() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    INSERT INTO memory_changes (tenant_id, memory_id, history_seq, change, action, scope, domain, agent_id,
                                kind, session_id, entity)
        SELECT n.tenant_id, n.memory_id, CASE WHEN c.what = 'erased' THEN NULL ELSE n.seq END, c.what,
               n.action, m.scope, m.domain, m.agent_id, m.kind, m.session_id, m.entity
        FROM new_rows n
        CROSS JOIN LATERAL (SELECT CASE n.action
            WHEN 'created' THEN 'created'
            WHEN 'superseded' THEN 'superseded'
            WHEN 'merged' THEN 'superseded'
            WHEN 'deleted' THEN 'forgotten'
            WHEN 'erased' THEN 'erased'
            WHEN 'stale' THEN 'summary_stale'
            ELSE 'updated' END AS what) c
        -- History of a memory that is gone already: nothing a reader could see.
        JOIN memories m ON m.tenant_id = n.tenant_id AND m.id = n.memory_id
        ORDER BY n.seq;
    -- Erasure: earlier entries of the memory keep only what visibility needs.
    UPDATE memory_changes c SET session_id = NULL, entity = NULL, history_seq = NULL
        FROM (SELECT DISTINCT tenant_id, memory_id FROM new_rows WHERE action = 'erased') e
        WHERE c.tenant_id = e.tenant_id AND c.memory_id = e.memory_id AND c.change <> 'erased';
    RETURN NULL;
END
$$;
DROP TRIGGER memory_history_change ON memory_history;
CREATE TRIGGER memory_history_change AFTER INSERT ON memory_history
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mp_record_changes();
DROP FUNCTION mp_record_change();

-- Numbering at commit, once per transaction instead of once per entry: a transaction that logs
-- a change leaves one row here, whose deferred trigger numbers all of the transaction's entries
-- (the only unnumbered entries it can see: others' are not committed, and every committed one
-- was numbered before its commit) under 0007's advisory lock, in id order, and removes the row.
-- Holds no tenant data, and only the triggers (as the owner) touch it.
CREATE TABLE memory_change_commits (
    txid  xid8 PRIMARY KEY
);
ALTER TABLE memory_change_commits ENABLE ROW LEVEL SECURITY;  -- no policy: no caller reads a row

CREATE FUNCTION mp_changes_to_number() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    INSERT INTO memory_change_commits VALUES (pg_current_xact_id()) ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_changes_to_number AFTER INSERT ON memory_changes
    FOR EACH STATEMENT EXECUTE FUNCTION mp_changes_to_number();

CREATE OR REPLACE FUNCTION mp_number_change() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    n bigint;
    first bigint;
BEGIN
    -- Held until the commit is visible: the next transaction numbers its rows after this one's.
    PERFORM pg_advisory_xact_lock(1835363696, 1);
    SELECT count(*) INTO n FROM memory_changes WHERE position IS NULL;
    IF n > 0 THEN
        -- A block of positions: only this function takes them, under the lock above.
        first := nextval('memory_change_position');
        IF n > 1 THEN
            PERFORM setval('memory_change_position', first + n - 1);
        END IF;
        UPDATE memory_changes c SET position = first + o.rn - 1, changed_at = clock_timestamp()
            FROM (SELECT tenant_id, id, row_number() OVER (ORDER BY id) AS rn
                  FROM memory_changes WHERE position IS NULL) o
            WHERE c.tenant_id = o.tenant_id AND c.id = o.id;
        PERFORM pg_notify('memplane_changes', '');
    END IF;
    DELETE FROM memory_change_commits WHERE txid = NEW.txid;
    RETURN NULL;
END
$$;
DROP TRIGGER memory_changes_number ON memory_changes;
CREATE CONSTRAINT TRIGGER memory_change_commits_number AFTER INSERT ON memory_change_commits
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION mp_number_change();

-- Staleness and the soft cascade (0009, 0010) once per UPDATE statement, from its transition
-- tables: the memories whose change can make a summary wrong mark their summaries stale (one
-- call per kind of change, which the history's reason names), and those forgotten forget what
-- was derived from them. Every UPDATE of memories now passes through here, but the frequent
-- ones (usage counters, turn windows) change few rows and match nothing below.
CREATE FUNCTION mp_stale_on_update() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    r record;
    forgotten uuid[];
BEGIN
    FOR r IN
        SELECT CASE WHEN n.status IS DISTINCT FROM o.status THEN n.status ELSE 'updated' END AS what,
               array_agg(o.id ORDER BY o.id) AS ids
        FROM old_rows o JOIN new_rows n ON n.tenant_id = o.tenant_id AND n.id = o.id
        WHERE o.status IN ('active', 'pending') AND (
            n.status IS DISTINCT FROM o.status OR n.content IS DISTINCT FROM o.content
            OR n.value IS DISTINCT FROM o.value OR n.entity IS DISTINCT FROM o.entity
            OR n.attribute IS DISTINCT FROM o.attribute)
        GROUP BY 1 ORDER BY 1
    LOOP
        PERFORM mp_mark_stale(r.ids, r.what);
    END LOOP;
    SELECT array_agg(o.id ORDER BY o.id) INTO forgotten
        FROM old_rows o JOIN new_rows n ON n.tenant_id = o.tenant_id AND n.id = o.id
        WHERE n.status = 'deleted' AND o.status <> 'deleted';
    IF forgotten IS NOT NULL THEN
        PERFORM mp_forget_derived(forgotten);
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER memories_stale_on_change ON memories;
CREATE TRIGGER memories_stale_on_change AFTER UPDATE ON memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mp_stale_on_update();
DROP FUNCTION mp_stale_on_change();

-- What was derived from a batch of forgotten memories: the recursive part's row estimate is far
-- above what it finds (tens of thousands for a handful), so the planner read all of memories and
-- memory_sources to hash them; by their indexes it reads only the links and rows it follows.
ALTER FUNCTION mp_derived(uuid[]) SET enable_seqscan = off;
