-- The graph channel's rarity base was the tenant's stored memories (tenant_usage.memory_count),
-- which counts every agent's private memories and the deleted ones. Search's explanation shows it
-- ("'x' (1 of 41 rows)", and as ln(total / n) in the component's value), so an agent key that reads
-- one memory learned that its tenant holds 40 it cannot read: a count across the agent boundary,
-- which GetStats never gives. The base is now what every entity count already is: the rows the
-- caller may read that the channel links (active or pending). One count under the caller's
-- visibility per graph search; the channel is off by default (MEMPLANE_GRAPH_WEIGHT=0).
-- CREATE OR REPLACE keeps the function's owner and grants (0017).
CREATE OR REPLACE FUNCTION mp_entity_links(seed_ids uuid[], query_entities text[], max_rows int)
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
    SELECT count(*) INTO total FROM memories m
    WHERE m.status IN ('active', 'pending')
      AND ((m.scope = 'global' AND m.tenant_id = tenant) OR (m.scope = 'domain' AND m.domain = ANY (domains))
           OR (m.scope = 'private' AND m.tenant_id = tenant AND m.agent_id = agent));
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
