-- The change log behind MemoryService.Watch: one row per recorded change of a memory (every
-- memory_history insert), written in the same transaction as the change, with a position that
-- increases in COMMIT order, so a reader that has seen position p never later sees a row below p.
--
-- How: a row is inserted with no position when its history row is; a deferred constraint
-- trigger numbers the transaction's rows at commit, under one transaction advisory lock held
-- until the commit is visible. Writing transactions therefore take turns only for their final
-- moment (numbering and the commit itself), and positions are never filled in behind a reader.
-- The rows hold ids, scope, kind, session and entity (for visibility and the Watch filters),
-- never content: a Watch event reads the memory's snapshot from its history row, which a hard
-- forget erases, so the log never outlives an erasure with content in it.
CREATE SEQUENCE memory_change_position AS bigint;

CREATE TABLE memory_changes (
    tenant_id    text NOT NULL,
    id           bigserial,
    position     bigint,  -- NULL only inside the writing transaction
    memory_id    uuid NOT NULL,
    history_seq  bigint,  -- the memory_history row with the memory as it was after the change
    change       text NOT NULL CHECK (change IN ('created','superseded','updated','forgotten','erased','summary_stale')),
    action       text NOT NULL,  -- the history action (created, merged, feedback, ...)
    scope        text NOT NULL CHECK (scope IN ('global','domain','private')),
    domain       text,
    agent_id     text,
    kind         text NOT NULL,
    session_id   text,
    entity       text,
    changed_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant_id, id)
);
-- Readers walk the log by position across tenants (domain memories span them): like
-- memories_id, this index is not led by tenant_id.
CREATE UNIQUE INDEX memory_changes_position ON memory_changes (position);
CREATE INDEX memory_changes_memory ON memory_changes (tenant_id, memory_id);

-- Pruning: everything up to pruned_through is gone; a reader behind it has missed changes.
CREATE TABLE memory_change_state (
    singleton       boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    pruned_through  bigint NOT NULL DEFAULT 0
);
INSERT INTO memory_change_state DEFAULT VALUES;

CREATE FUNCTION mp_record_change() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    m record;
    what text;
BEGIN
    what := CASE NEW.action
        WHEN 'created' THEN 'created'
        WHEN 'superseded' THEN 'superseded'
        WHEN 'merged' THEN 'superseded'
        WHEN 'deleted' THEN 'forgotten'
        WHEN 'erased' THEN 'erased'
        WHEN 'stale' THEN 'summary_stale'  -- migration 0009's trigger
        ELSE 'updated' END;
    SELECT mm.scope, mm.domain, mm.agent_id, mm.kind, mm.session_id, mm.entity INTO m
        FROM memories mm WHERE mm.tenant_id = NEW.tenant_id AND mm.id = NEW.memory_id;
    IF NOT FOUND THEN
        RETURN NULL;  -- history of a memory that is gone already: nothing a reader could see
    END IF;
    INSERT INTO memory_changes (tenant_id, memory_id, history_seq, change, action, scope, domain, agent_id,
                                kind, session_id, entity)
        VALUES (NEW.tenant_id, NEW.memory_id, CASE WHEN what = 'erased' THEN NULL ELSE NEW.seq END, what,
                NEW.action, m.scope, m.domain, m.agent_id, m.kind, m.session_id, m.entity);
    IF what = 'erased' THEN
        -- Erasure: earlier entries of the memory keep only what visibility needs.
        UPDATE memory_changes SET session_id = NULL, entity = NULL, history_seq = NULL
            WHERE tenant_id = NEW.tenant_id AND memory_id = NEW.memory_id AND change <> 'erased';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_history_change AFTER INSERT ON memory_history
    FOR EACH ROW EXECUTE FUNCTION mp_record_change();

CREATE FUNCTION mp_number_change() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    -- Held until the commit is visible: the next transaction numbers its rows after this one's.
    -- (Two-int advisory keys live apart from the bigint keys the write path locks.)
    PERFORM pg_advisory_xact_lock(1835363696, 1);
    UPDATE memory_changes SET position = nextval('memory_change_position'), changed_at = clock_timestamp()
        WHERE tenant_id = NEW.tenant_id AND id = NEW.id;
    PERFORM pg_notify('memplane_changes', '');  -- one per transaction: equal notifications fold
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER memory_changes_number AFTER INSERT ON memory_changes
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION mp_number_change();

-- Row-level security: a change is readable exactly when its memory would be (DESIGN §1).
-- Rows are written only by the triggers above, which run as the owner.
GRANT SELECT ON memory_changes TO memplane_app;
ALTER TABLE memory_changes ENABLE ROW LEVEL SECURITY;
CREATE POLICY memory_changes_read ON memory_changes FOR SELECT TO memplane_app USING (
    (scope = 'global' AND tenant_id = mp_tenant())
    OR (scope = 'domain' AND domain = ANY (mp_read_domains()))
    OR (scope = 'private' AND tenant_id = mp_tenant() AND agent_id = mp_agent()));
