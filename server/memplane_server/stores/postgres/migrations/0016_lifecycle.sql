-- Lifecycle policies (issue 14): per tenant, per kind, run by scheduled 'lifecycle' jobs.
--
-- A policy is stored whole as JSON (core/lifecycle.py validates and reads it); the columns on
-- memories are what a run leaves behind that is not a forget:
--   * lifecycle_weight: a rarely used but confident memory is kept at a lower weight, which
--     Search multiplies into its score (and names in the score explanation); 1 = untouched;
--   * review_flagged_at: an often used memory of low confidence, flagged for a person to review;
--   * status 'archived': the episodic memories of a finished task, kept but out of default search
--     (asked for by status, like pending).
-- Removals are forgets (the existing path: cascades, history, audit, change stream).
CREATE TABLE lifecycle_policies (
    tenant_id   text PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    enabled     boolean NOT NULL,
    policy      jsonb NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    updated_by  text NOT NULL
);
GRANT SELECT, INSERT, UPDATE, DELETE ON lifecycle_policies TO memplane_app;
ALTER TABLE lifecycle_policies ENABLE ROW LEVEL SECURITY;
CREATE POLICY lifecycle_policies_tenant ON lifecycle_policies FOR ALL TO memplane_app
    USING (tenant_id = mp_tenant()) WITH CHECK (tenant_id = mp_tenant());

ALTER TABLE memories ADD COLUMN lifecycle_weight real NOT NULL DEFAULT 1
    CHECK (lifecycle_weight > 0 AND lifecycle_weight <= 1);
ALTER TABLE memories ADD COLUMN review_flagged_at timestamptz;
CREATE INDEX memories_review_flagged ON memories (tenant_id, review_flagged_at DESC) WHERE review_flagged_at IS NOT NULL;

ALTER TABLE memories DROP CONSTRAINT memories_status_check;
ALTER TABLE memories ADD CONSTRAINT memories_status_check
    CHECK (status IN ('active','pending','superseded','deleted','stale','needs_confirmation','archived'));
