-- A term is common (left out of the keyword match, still counted in the ranking) only when it is
-- in more than max_share of the tenant's rows and in 10 rows or more. The share alone made every
-- term of a small tenant common once its statistics were counted (a word in 2 of 20 rows is 10%),
-- so its keyword channels matched nothing; the rule is for a speaker's name in every turn of a
-- chat, which a term in fewer than 10 rows is not, and matching so few rows costs nothing.
-- Otherwise as in 0027 (with 0031's search_path); replaced in place, so its grants stay.
CREATE OR REPLACE FUNCTION mp_keyword_matches(terms text[], query tsquery, windows boolean, max_share real, max_matches integer)
RETURNS TABLE (tenant_id text, id uuid, rank real, created_at timestamptz)
-- As in 0013: its statements may settle on generic plans, the same GIN lookup for any caller.
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp SET plan_cache_mode = auto ROWS 200 AS $$
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
              WHERE u.share <= max_share OR u.share * coalesce(counted, 0) < 10
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
