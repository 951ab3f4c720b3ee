-- Entity index for the graph channel (issue 15): each memory's entities (people, places,
-- organisations, products, events, titles; lowercase keys from core/entities.py, computed when
-- its content is written or changed), and a GIN index whose keys are the entity joined with the
-- row's visibility partition ('t:<tenant>|<entity>' for global and private rows,
-- 'd:<domain>|<entity>' for domain rows), so one lookup reads only the postings of the caller's
-- tenant and domains, as the keyword index of 0013 does. The entities are a column of memories,
-- so they carry its row-level security: an entity is never read apart from its memory, and every
-- change, forget, erasure, export and import of the memory takes its entities with it.
-- Tenant and domain ids are [a-z0-9_-] (core/validation.py), so '|' ends the partition.
-- Nullable: an import of an export made before this migration fills a missing column with NULL
-- (jsonb_populate_record), and such a memory simply names no entity.
ALTER TABLE memories ADD COLUMN entities text[] DEFAULT '{}';

CREATE FUNCTION mp_entity_keys(tenant_id text, scope text, domain text, entities text[]) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array(SELECT CASE WHEN scope = 'domain' THEN 'd:' || domain ELSE 't:' || tenant_id END || '|' || e
                 FROM unnest(entities) AS e)
$$;
CREATE INDEX memories_entity_keys ON memories USING gin (mp_entity_keys(tenant_id, scope, domain, entities))
    WHERE entities <> '{}';

-- The links of the graph channel: the rows holding each of the query's entities and of the
-- entities of the seed memories (the first pass's best hits), with each entity's count among the
-- rows the caller may read (its rarity). An entity held by more than max_rows of them is too
-- common to link anything and is left out (a speaker's name addressed in every other turn).
-- Like mp_keyword_matches (0013) it runs as the owner so the GIN index serves (`&&` is not
-- leakproof, so under RLS it could not), reads the caller from the transaction's settings (never
-- from its arguments), applies the read policy's predicate to the seeds and to every row it
-- returns, and the caller joins the ids back to memories under RLS and its own filters.
CREATE FUNCTION mp_entity_links(seed_ids uuid[], query_entities text[], max_rows int)
RETURNS TABLE (tenant_id text, id uuid, entity text, rows_holding int, tenant_rows bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public SET plan_cache_mode = auto ROWS 200 AS $$
DECLARE
    tenant text := mp_tenant();
    agent text := mp_agent();
    domains text[] := mp_read_domains();
    partitions text[];
    wanted text[];
    total bigint;
BEGIN
    IF tenant IS NULL THEN
        RETURN;
    END IF;
    partitions := array_prepend('t:' || tenant, array(SELECT 'd:' || d FROM unnest(domains) AS d));
    SELECT array_agg(DISTINCT e) INTO wanted FROM (
        SELECT unnest(query_entities) AS e
        UNION ALL
        SELECT unnest(m.entities) FROM memories m
        WHERE m.id = ANY (seed_ids)
          AND ((m.scope = 'global' AND m.tenant_id = tenant) OR (m.scope = 'domain' AND m.domain = ANY (domains))
               OR (m.scope = 'private' AND m.tenant_id = tenant AND m.agent_id = agent))) AS s
    WHERE e <> '';
    IF wanted IS NULL THEN
        RETURN;
    END IF;
    SELECT u.memory_count INTO total FROM tenant_usage u WHERE u.tenant_id = tenant;
    RETURN QUERY
    WITH found AS (
        SELECT w.e, h.tenant_id, h.id FROM unnest(wanted) AS w(e)
        CROSS JOIN LATERAL (
            SELECT m.tenant_id, m.id FROM memories m
            WHERE mp_entity_keys(m.tenant_id, m.scope, m.domain, m.entities)
                  && array(SELECT p || '|' || w.e FROM unnest(partitions) AS p)
              AND m.entities <> '{}'
              AND m.status IN ('active', 'pending')
              AND ((m.scope = 'global' AND m.tenant_id = tenant) OR (m.scope = 'domain' AND m.domain = ANY (domains))
                   OR (m.scope = 'private' AND m.tenant_id = tenant AND m.agent_id = agent))
            LIMIT max_rows + 1) AS h),
    counted AS (SELECT f.e, count(*)::int AS n FROM found f GROUP BY f.e)
    SELECT f.tenant_id, f.id, f.e, c.n, coalesce(total, 0) FROM found f JOIN counted c ON c.e = f.e
    WHERE c.n <= max_rows;
END
$$;
REVOKE ALL ON FUNCTION mp_entity_links(uuid[], text[], int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mp_entity_links(uuid[], text[], int) TO memplane_app;
