-- Signals are memories' equals (issue 48). A decision's reason may repeat what a caller sent (a
-- search's query, a fact's entity and attribute), so it is stored sealed as memory content is
-- (stores/sealing.py), under the key named here: the user's key for a search filtered to a user,
-- so that the user's erasure shreds it in every backup too, else the tenant's data key. NULL: in
-- clear (no key-encryption key configured).
ALTER TABLE reflection_decisions ADD COLUMN sealed_key bytea;
-- The signals kept until now hold their queries in clear and unscreened. SQL cannot seal them (the
-- database never holds a key), and a signal is worth less than a clear copy of a query.
DELETE FROM reflection_decisions WHERE subject_type = 'search';
-- A signal repeats a caller's query: it is its own agent's to read (a key bound to no agent: those
-- of searches made without one), and a tenant admin's, whose listing runs as the owner with the
-- tenant named (stores/postgres/decisions.py); never every agent's of the tenant. Decisions about
-- tasks and sessions stay as they were: an agent's are its own, a tenant key's the tenant's.
DROP POLICY reflection_decisions_owner ON reflection_decisions;
CREATE POLICY reflection_decisions_owner ON reflection_decisions FOR ALL TO memplane_app
    USING (tenant_id = mp_tenant()
           AND (agent_id IS NOT DISTINCT FROM mp_agent() OR (agent_id IS NULL AND subject_type <> 'search')))
    WITH CHECK (tenant_id = mp_tenant() AND agent_id IS NOT DISTINCT FROM mp_agent());
