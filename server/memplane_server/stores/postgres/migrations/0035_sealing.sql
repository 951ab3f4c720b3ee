-- Encryption at rest (stores/sealing.py): a memory's content, context, value and metadata are
-- stored sealed (AES-256-GCM) under a data key of its tenant; sealed_key holds that data key,
-- wrapped by a key-encryption key the database never sees. NULL: the row is stored in clear
-- (written before encryption was configured, or with it off).
ALTER TABLE memories ADD COLUMN sealed_key bytea;
-- A session digest summarises its turns: sealed alike.
ALTER TABLE session_digests ADD COLUMN sealed_key bytea;

-- Every data key of a tenant, wrapped; the highest version seals new writes. Read and written
-- only by the owner (the server's key handling names the tenant), never by the application role:
-- a wrapped key is useless without the KEK, and still no query of a caller needs one.
CREATE TABLE tenant_keys (
    tenant_id   text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    version     integer NOT NULL CHECK (version > 0),
    wrapped     bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- A rotation leaves the tenant's older rows to re-seal: what the workers' key upkeep reads,
    -- instead of scanning every memory each round.
    reseal_pending boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, version)
);

-- Sealing changes the stored bytes of content and value without changing what they say: a row
-- whose sealed_key changed with them was re-sealed (rotation, or sealing a row stored in clear),
-- which makes no summary stale. A caller's change keeps the row's key.
CREATE OR REPLACE FUNCTION mp_stale_on_update() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_temp AS $$
DECLARE
    r record;
    forgotten uuid[];
BEGIN
    FOR r IN
        SELECT CASE WHEN n.status IS DISTINCT FROM o.status THEN n.status ELSE 'updated' END AS what,
               array_agg(o.id ORDER BY o.id) AS ids
        FROM old_rows o JOIN new_rows n ON n.tenant_id = o.tenant_id AND n.id = o.id
        WHERE o.status IN ('active', 'pending') AND (
            n.status IS DISTINCT FROM o.status
            OR ((n.content IS DISTINCT FROM o.content OR n.value IS DISTINCT FROM o.value)
                AND n.sealed_key IS NOT DISTINCT FROM o.sealed_key)
            OR n.entity IS DISTINCT FROM o.entity
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

-- As in 0031, with the key the content is sealed under (NULL where the content is withheld).
DROP FUNCTION mp_derived(uuid[]);
CREATE FUNCTION mp_derived(source_ids uuid[])
RETURNS TABLE (tenant_id text, id uuid, kind text, status text, session_id text, user_id text, content text,
               sealed_key bytea)
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
            CASE WHEN invoker IS NULL OR m.tenant_id = invoker THEN m.content END,
            CASE WHEN invoker IS NULL OR m.tenant_id = invoker THEN m.sealed_key END
        FROM memories m WHERE m.id = ANY (reached);
END
$$;
ALTER FUNCTION mp_derived(uuid[]) SET enable_seqscan = off;
REVOKE ALL ON FUNCTION mp_derived(uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mp_derived(uuid[]) TO memplane_app;
