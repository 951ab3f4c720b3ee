-- Conflicts surfaced (issue 13): a value that contradicts a recent, confident one, or another
-- agent's, is stored as 'needs_confirmation' beside the value it contradicts instead of silently
-- replacing it, until ResolveConflict confirms one side.
ALTER TABLE memories DROP CONSTRAINT memories_status_check;
ALTER TABLE memories ADD CONSTRAINT memories_status_check
    CHECK (status IN ('active','pending','superseded','deleted','stale','needs_confirmation'));
ALTER TABLE memories ADD COLUMN conflicts_with uuid;
ALTER TABLE memories ADD CONSTRAINT memories_conflict_named
    CHECK (status <> 'needs_confirmation' OR conflicts_with IS NOT NULL);
-- Open conflicts, newest first; and a served memory's challengers (its id may be another
-- tenant's domain memory, so it is looked up alone).
CREATE INDEX memories_open_conflicts ON memories (tenant_id, created_at DESC, id) WHERE status = 'needs_confirmation';
CREATE INDEX memories_challengers ON memories (conflicts_with) WHERE status = 'needs_confirmation';
