-- The keyword channels' matching (mp_keyword_matches, 0013) with a bound on the rows it ranks.
-- A term under the common share (5%) of a big tenant still matched thousands of rows (5,000 at
-- 100,000 memories), every one read from the heap and ranked inside the function, though the
-- caller keeps 200. ts_rank knows nothing of how rare a term is, so a row holding only such a term
-- ranks as well as a row holding a rare one, and BM25, which does know, sees only the 200 the rank
-- put first. Now the terms join the match rarest first, by the rows they are expected to match
-- (their share in keyword_stats times the tenant's memory count when counted), while the expected
-- total stays within max_matches; the rarest term always joins, and terms below the statistics'
-- floor (1%, not listed) count as matching none, so they always join too. Where the query's listed
-- terms do not add up to max_matches (always, in a tenant of up to max_matches rows) nothing changes.
-- The four-argument function of 0013 stays: servers of the previous release accept this schema
-- (docs/scaling.md, rolling upgrades) and call it until they are replaced.
CREATE FUNCTION mp_keyword_matches(terms text[], query tsquery, windows boolean, max_share real, max_matches integer)
RETURNS TABLE (tenant_id text, id uuid, rank real, created_at timestamptz)
-- As in 0013: its statements may settle on generic plans, the same GIN lookup for any caller.
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public SET plan_cache_mode = auto ROWS 200 AS $$
DECLARE
    tenant text := mp_tenant();
    agent text := mp_agent();
    domains text[] := mp_read_domains();
    stats_field text := CASE WHEN windows THEN 'context_keywords' ELSE 'keywords' END;
    shares jsonb;
    counted bigint;
    keys text[];
BEGIN
    IF tenant IS NULL THEN
        RETURN;
    END IF;
    SELECT s.common, s.memory_count INTO shares, counted FROM keyword_stats s
        WHERE s.tenant_id = tenant AND s.field = stats_field;
    SELECT array_agg(c.term || p) INTO keys
        FROM (SELECT u.term, row_number() OVER w AS place,
                     sum(u.share * coalesce(counted, 0)) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS expected
              FROM (SELECT t AS term, coalesce((shares ->> t)::real, 0) AS share FROM unnest(terms) AS t
                    -- A term with a space could end in another partition's name; tokens never hold one.
                    WHERE position(' ' IN t) = 0) AS u
              WHERE u.share <= max_share
              WINDOW w AS (ORDER BY u.share, u.term)) AS c,
             unnest(array_prepend(' t:' || tenant, array(SELECT ' d:' || d FROM unnest(domains) AS d))) AS p
        WHERE c.place = 1 OR c.expected <= max_matches;
    IF keys IS NULL THEN
        RETURN;
    END IF;
    IF windows THEN
        RETURN QUERY SELECT m.tenant_id, m.id, ts_rank(m.context_keywords, query, 1), m.created_at FROM memories m
            WHERE mp_keyword_keys(m.tenant_id, m.scope, m.domain, m.context_keywords) && keys
              AND ((m.scope = 'global' AND m.tenant_id = tenant) OR (m.scope = 'domain' AND m.domain = ANY (domains))
                   OR (m.scope = 'private' AND m.tenant_id = tenant AND m.agent_id = agent));
    ELSE
        RETURN QUERY SELECT m.tenant_id, m.id, ts_rank(m.keywords, query, 1), m.created_at FROM memories m
            WHERE mp_keyword_keys(m.tenant_id, m.scope, m.domain, m.keywords) && keys
              AND ((m.scope = 'global' AND m.tenant_id = tenant) OR (m.scope = 'domain' AND m.domain = ANY (domains))
                   OR (m.scope = 'private' AND m.tenant_id = tenant AND m.agent_id = agent));
    END IF;
END
$$;
REVOKE ALL ON FUNCTION mp_keyword_matches(text[], tsquery, boolean, real, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mp_keyword_matches(text[], tsquery, boolean, real, integer) TO memplane_app;
