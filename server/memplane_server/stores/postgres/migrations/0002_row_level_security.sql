-- Row-level security: a second wall behind the application's visibility predicate.
-- Every caller-scoped transaction runs as the role memplane_app with the caller's tenant,
-- agent and domain grants in transaction-local settings; the policies below repeat the rule
-- of DESIGN §1. The owner role (migrations, the job queue's claim, admin tables) is not
-- restricted, so RLS is enabled but not forced.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'memplane_app') THEN
        CREATE ROLE memplane_app NOLOGIN;
    END IF;
END
$$;
-- A non-superuser owner must be a member to SET ROLE; a superuser is allowed anyway.
DO $$
BEGIN
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE format('GRANT memplane_app TO %I', current_user);
    END IF;
END
$$;

CREATE FUNCTION mp_tenant() RETURNS text LANGUAGE sql STABLE
    AS $$ SELECT nullif(current_setting('memplane.tenant_id', true), '') $$;
CREATE FUNCTION mp_agent() RETURNS text LANGUAGE sql STABLE
    AS $$ SELECT nullif(current_setting('memplane.agent_id', true), '') $$;
CREATE FUNCTION mp_read_domains() RETURNS text[] LANGUAGE sql STABLE
    AS $$ SELECT coalesce(string_to_array(nullif(current_setting('memplane.read_domains', true), ''), ','), '{}') $$;
CREATE FUNCTION mp_write_domains() RETURNS text[] LANGUAGE sql STABLE
    AS $$ SELECT coalesce(string_to_array(nullif(current_setting('memplane.write_domains', true), ''), ','), '{}') $$;

CREATE TABLE tenant_usage (
    tenant_id     text PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    memory_count  bigint NOT NULL DEFAULT 0 CHECK (memory_count >= 0)
);
INSERT INTO tenant_usage (tenant_id, memory_count)
    SELECT t.id, (SELECT count(*) FROM memories m WHERE m.tenant_id = t.id) FROM tenants t;

GRANT SELECT, INSERT, UPDATE, DELETE ON memories, memory_history, jobs, tenant_usage TO memplane_app;
GRANT USAGE ON SEQUENCE memory_history_seq_seq TO memplane_app;
GRANT SELECT ON tenants TO memplane_app;

ALTER TABLE memories ENABLE ROW LEVEL SECURITY;
CREATE POLICY memories_read ON memories FOR SELECT TO memplane_app USING (
    (scope = 'global' AND tenant_id = mp_tenant())
    OR (scope = 'domain' AND domain = ANY (mp_read_domains()))
    OR (scope = 'private' AND tenant_id = mp_tenant() AND agent_id = mp_agent()));
CREATE POLICY memories_insert ON memories FOR INSERT TO memplane_app WITH CHECK (
    tenant_id = mp_tenant() AND (
        scope = 'global'
        OR (scope = 'domain' AND domain = ANY (mp_write_domains()))
        OR (scope = 'private' AND agent_id = mp_agent())));
CREATE POLICY memories_update ON memories FOR UPDATE TO memplane_app USING (
    (scope = 'global' AND tenant_id = mp_tenant())
    OR (scope = 'domain' AND domain = ANY (mp_write_domains()))
    OR (scope = 'private' AND tenant_id = mp_tenant() AND agent_id = mp_agent()))
WITH CHECK (
    (scope = 'global' AND tenant_id = mp_tenant())
    OR (scope = 'domain' AND domain = ANY (mp_write_domains()))
    OR (scope = 'private' AND tenant_id = mp_tenant() AND agent_id = mp_agent()));
CREATE POLICY memories_delete ON memories FOR DELETE TO memplane_app USING (
    (scope = 'global' AND tenant_id = mp_tenant())
    OR (scope = 'domain' AND domain = ANY (mp_write_domains()))
    OR (scope = 'private' AND tenant_id = mp_tenant() AND agent_id = mp_agent()));

-- History follows its memory: readable when the memory is, written when the memory is writable.
ALTER TABLE memory_history ENABLE ROW LEVEL SECURITY;
CREATE POLICY history_read ON memory_history FOR SELECT TO memplane_app USING (
    EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = memory_history.tenant_id AND m.id = memory_history.memory_id));
CREATE POLICY history_insert ON memory_history FOR INSERT TO memplane_app WITH CHECK (
    EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = memory_history.tenant_id AND m.id = memory_history.memory_id
            AND ((m.scope = 'global' AND m.tenant_id = mp_tenant())
                 OR (m.scope = 'domain' AND m.domain = ANY (mp_write_domains()))
                 OR (m.scope = 'private' AND m.tenant_id = mp_tenant() AND m.agent_id = mp_agent()))));
CREATE POLICY history_delete ON memory_history FOR DELETE TO memplane_app USING (
    EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = memory_history.tenant_id AND m.id = memory_history.memory_id
            AND ((m.scope = 'global' AND m.tenant_id = mp_tenant())
                 OR (m.scope = 'domain' AND m.domain = ANY (mp_write_domains()))
                 OR (m.scope = 'private' AND m.tenant_id = mp_tenant() AND m.agent_id = mp_agent()))));

ALTER TABLE jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY jobs_tenant ON jobs FOR ALL TO memplane_app
    USING (tenant_id = mp_tenant()) WITH CHECK (tenant_id = mp_tenant());

ALTER TABLE tenant_usage ENABLE ROW LEVEL SECURITY;
CREATE POLICY usage_tenant ON tenant_usage FOR ALL TO memplane_app
    USING (tenant_id = mp_tenant()) WITH CHECK (tenant_id = mp_tenant());

-- Tenants are readable (for their quota) only by themselves.
ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenants_self ON tenants FOR SELECT TO memplane_app USING (id = mp_tenant());

-- Stored-memory counts per tenant, kept by triggers that run as the owner: a domain memory
-- hard-deleted by another member tenant still decrements its author's count.
CREATE FUNCTION mp_count_memories() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO tenant_usage AS u (tenant_id, memory_count)
            SELECT tenant_id, count(*) FROM new_rows GROUP BY tenant_id
            ON CONFLICT (tenant_id) DO UPDATE SET memory_count = u.memory_count + EXCLUDED.memory_count;
    ELSE
        UPDATE tenant_usage u SET memory_count = u.memory_count - d.n
            FROM (SELECT tenant_id, count(*) AS n FROM old_rows GROUP BY tenant_id) d
            WHERE u.tenant_id = d.tenant_id;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_count_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION mp_count_memories();
CREATE TRIGGER memories_count_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION mp_count_memories();
