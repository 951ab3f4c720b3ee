-- The second wall's SECURITY DEFINER functions run as the owner, past row-level security. Some
-- were executable by PUBLIC (PostgreSQL's default for a new function), so any role could call
-- the cascades on ids of any tenant (mp_erase_derived, mp_forget_derived, mp_mark_stale,
-- mp_scrub_jobs); mp_derived handed the content of other tenants' memories to the application
-- role, mp_sources_alive told it whether an id exists in any tenant, mp_mark_context emptied any
-- tenant's turn windows; and every one set `search_path = public` without `pg_temp` last, so a
-- temporary object could stand in for a table or function they name.
--
-- Now: each is revoked from PUBLIC; only the functions the application role calls itself are
-- granted to it (the rest run from triggers, as the owner); each sets `search_path = public,
-- pg_temp`; and those the application role calls read its caller from the transaction
-- (mp_invoker_tenant) and act only within that tenant (and, for reads, the domains it reads).
-- The owner's own connections (erasure, the worker) keep their reach across tenants.
-- tests/integration/test_definer_wall.py checks every such function in the catalog.

-- The tenant of the caller-scoped transaction (stores/postgres/session.py) that called a SECURITY
-- DEFINER function; NULL when the owner called it. Inside such a function current_user is the
-- owner, but the `role` setting is still the invoker's.
CREATE FUNCTION mp_invoker_tenant() RETURNS text LANGUAGE sql STABLE SET search_path = public, pg_temp AS $$
    SELECT CASE WHEN current_setting('role') = 'memplane_app' THEN coalesce(mp_tenant(), '') END
$$;

-- As in 0024; for the application role, another tenant's derived rows come with their ids, kind
-- and status only (a forget drops their cached copies by id), never their session, user or content.
CREATE OR REPLACE FUNCTION mp_derived(source_ids uuid[])
RETURNS TABLE (tenant_id text, id uuid, kind text, status text, session_id text, user_id text, content text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    frontier uuid[] := source_ids;
    reached uuid[] := '{}';
    found uuid[];
    invoker text := mp_invoker_tenant();
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
    RETURN QUERY SELECT m.tenant_id, m.id, m.kind, m.status,
            CASE WHEN invoker IS NULL OR m.tenant_id = invoker THEN m.session_id END,
            CASE WHEN invoker IS NULL OR m.tenant_id = invoker THEN m.user_id END,
            CASE WHEN invoker IS NULL OR m.tenant_id = invoker THEN m.content END
        FROM memories m WHERE m.id = ANY (reached);
END
$$;

-- As in 0010; for the application role only the sources its tenant may read count (its own
-- memories and those of the domains it reads): an id elsewhere is as absent as one nowhere.
CREATE OR REPLACE FUNCTION mp_sources_alive(source_ids uuid[]) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    invoker text := mp_invoker_tenant();
    alive bigint;
BEGIN
    SELECT count(*) INTO alive FROM (
        SELECT m.id, m.status FROM memories m WHERE m.id = ANY (source_ids)
          AND (invoker IS NULL OR m.tenant_id = invoker
               OR (m.scope = 'domain' AND m.domain = ANY (mp_read_domains())))
        ORDER BY m.id FOR SHARE
    ) x WHERE x.status <> 'deleted';
    RETURN alive = cardinality(source_ids);
END
$$;

-- As in 0029; for the application role only its own tenant's sessions are marked or emptied.
CREATE OR REPLACE FUNCTION mp_mark_context(tenant_ids text[], session_ids text[], clear boolean)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    invoker text := mp_invoker_tenant();
BEGIN
    IF invoker IS NOT NULL THEN
        SELECT coalesce(array_agg(s.tenant_id), '{}'), coalesce(array_agg(s.session_id), '{}')
            INTO tenant_ids, session_ids
            FROM unnest(tenant_ids, session_ids) AS s(tenant_id, session_id) WHERE s.tenant_id = invoker;
    END IF;
    INSERT INTO context_queue AS q (tenant_id, session_id)
        SELECT DISTINCT s.tenant_id, s.session_id FROM unnest(tenant_ids, session_ids) AS s(tenant_id, session_id)
        WHERE s.session_id IS NOT NULL
        ORDER BY 1, 2  -- one lock order for all writers
        ON CONFLICT (tenant_id, session_id) DO UPDATE SET marked_at = clock_timestamp();
    IF clear THEN
        DELETE FROM context_queue q
            USING unnest(tenant_ids, session_ids) AS s(tenant_id, session_id)
            WHERE q.tenant_id = s.tenant_id AND q.session_id = s.session_id
              AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = s.tenant_id
                              AND m.session_id = s.session_id AND m.kind = 'turn');
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

DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = 'public' AND p.prosecdef AND p.proowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM memplane_app', f);
        EXECUTE format('ALTER FUNCTION %s SET search_path = public, pg_temp', f);
    END LOOP;
END
$$;
-- What the application role calls itself (stores/postgres: lexical.py, entities.py, memories.py,
-- memory_writes.py, contexts.py); each bounds itself by the caller in the transaction.
GRANT EXECUTE ON FUNCTION mp_keyword_matches(text[], tsquery, boolean, real) TO memplane_app;
GRANT EXECUTE ON FUNCTION mp_keyword_matches(text[], tsquery, boolean, real, integer) TO memplane_app;
GRANT EXECUTE ON FUNCTION mp_entity_links(uuid[], text[], int) TO memplane_app;
GRANT EXECUTE ON FUNCTION mp_derived(uuid[]) TO memplane_app;
GRANT EXECUTE ON FUNCTION mp_sources_alive(uuid[]) TO memplane_app;
GRANT EXECUTE ON FUNCTION mp_mark_context(text[], text[], boolean) TO memplane_app;
