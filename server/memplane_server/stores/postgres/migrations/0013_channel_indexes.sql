-- Every search channel on an index under row-level security (issue 11). Callers' queries run as
-- memplane_app under the policies of 0002; a policy's predicate must run before any condition
-- whose function is not LEAKPROOF, so such a condition can never be an index condition. Only a
-- superuser may mark a function LEAKPROOF, and deployments run as an ordinary owner, so:

-- Exact channel: stored lowercase keys. lower() is not leakproof, but texteq is, so a plain btree
-- on the stored key serves under RLS where an index on lower(entity) could not. A trigger keeps
-- them (not generated columns: an import inserts every column of an exported row, and PostgreSQL
-- refuses values for generated ones).
ALTER TABLE memories ADD COLUMN entity_key text, ADD COLUMN attribute_key text;
UPDATE memories SET entity_key = lower(entity), attribute_key = lower(attribute)
    WHERE entity IS NOT NULL OR attribute IS NOT NULL;
CREATE FUNCTION mp_fact_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.entity_key := lower(NEW.entity);
    NEW.attribute_key := lower(NEW.attribute);
    RETURN NEW;
END
$$;
CREATE TRIGGER memories_fact_keys BEFORE INSERT OR UPDATE OF entity, attribute, entity_key, attribute_key
    ON memories FOR EACH ROW EXECUTE FUNCTION mp_fact_keys();
CREATE INDEX memories_tenant_entity_key ON memories (tenant_id, entity_key) WHERE entity_key IS NOT NULL;
CREATE INDEX memories_tenant_attribute_key ON memories (tenant_id, attribute_key) WHERE attribute_key IS NOT NULL;
-- The same keys for domain memories, which other tenants read by domain.
CREATE INDEX memories_domain_entity_key ON memories (domain, entity_key) WHERE domain IS NOT NULL AND entity_key IS NOT NULL;

-- Keyword channels. `@@` (ts_match_vq) is not leakproof, so under RLS the GIN index on keywords
-- was never used: every search scanned and ranked the tenant's rows. Chosen formulation: a
-- SECURITY DEFINER function (below) finds the matching rows as the owner, through a GIN index
-- whose keys are the lexemes joined with the row's visibility partition ('t:<tenant>' for global
-- and private rows, 'd:<domain>' for domain rows), so a lookup reads only the postings of the
-- caller's tenant and domains, never another tenant's. It reads the caller from the same
-- transaction settings the policies read (mp_tenant() ...), takes no tenant, agent or domain
-- from its arguments, and applies the policy's predicate itself; the caller's query then joins
-- its ids back to memories under RLS and the store's visibility predicate, so the policy stays
-- the second wall. (A separate postings table would do too, but every write, update, forget and
-- window build would have to keep it; the expression index is kept by PostgreSQL.)
-- A lexeme never contains a space, so '<lexeme> <partition>' is unambiguous.
CREATE FUNCTION mp_keyword_keys(tenant_id text, scope text, domain text, k tsvector) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array(SELECT lexeme || CASE WHEN scope = 'domain' THEN ' d:' || domain ELSE ' t:' || tenant_id END
                 FROM unnest(tsvector_to_array(k)) AS lexeme)
$$;
DROP INDEX memories_keywords;  -- tenant-blind, and unusable under RLS
CREATE INDEX memories_keyword_keys ON memories USING gin (mp_keyword_keys(tenant_id, scope, domain, keywords));
CREATE INDEX memories_context_keyword_keys ON memories
    USING gin (mp_keyword_keys(tenant_id, scope, domain, context_keywords));

-- How common each term is in a tenant (document frequency as a share of its rows, for the own
-- keywords and for the turn windows apart): a query term in a large share of the tenant's rows
-- (a speaker's name in a chat) matches thousands of rows and ranks none of them better, so the
-- keyword channels leave it out of the match (BM25 still counts it among the candidates). Kept
-- periodically by the background work (stores/postgres/keyword_stats.py) from a sample; only
-- terms above a floor share are stored, every other term counts as rare.
CREATE TABLE keyword_stats (
    tenant_id     text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    field         text NOT NULL CHECK (field IN ('keywords', 'context_keywords')),
    docs          bigint NOT NULL,
    common        jsonb NOT NULL,  -- term -> share of docs holding it
    memory_count  bigint NOT NULL, -- the tenant's stored memories when counted (tenant_usage)
    windows_pending boolean NOT NULL, -- sessions of the tenant were waiting for windows then
    refreshed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, field)
);

-- The rows whose keywords (or, with windows, turn-window keywords) hold any of the terms that
-- are not too common in the caller's tenant (share of its rows above max_share), among the rows
-- the caller may read, with their rank for the whole query (ranked here, where each row is read
-- anyway, so the caller can read back only the best of them). Returns nothing when every term is
-- that common: such a match would rank thousands of rows on words that tell them apart from
-- nothing.
CREATE FUNCTION mp_keyword_matches(terms text[], query tsquery, windows boolean, max_share real)
RETURNS TABLE (tenant_id text, id uuid, rank real, created_at timestamptz)
-- Its statements may settle on generic plans (the pool's force_custom_plan is for the HNSW
-- searches, whose plans depend on the tenant's size): planning them on every call cost more than
-- running them (about 4 of 7 ms, bench/README.md), and their plan is the same GIN lookup for any
-- caller.
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public SET plan_cache_mode = auto ROWS 200 AS $$
DECLARE
    tenant text := mp_tenant();
    agent text := mp_agent();
    domains text[] := mp_read_domains();
    stats_field text := CASE WHEN windows THEN 'context_keywords' ELSE 'keywords' END;
    keys text[];
BEGIN
    IF tenant IS NULL THEN
        RETURN;
    END IF;
    SELECT array_agg(t || p) INTO keys
        FROM unnest(terms) AS t,
             unnest(array_prepend(' t:' || tenant, array(SELECT ' d:' || d FROM unnest(domains) AS d))) AS p
        -- A term with a space could end in another partition's name; tokens never hold one.
        WHERE position(' ' IN t) = 0
          AND coalesce((SELECT (s.common ->> t)::real FROM keyword_stats s
                        WHERE s.tenant_id = tenant AND s.field = stats_field), 0) <= max_share;
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
REVOKE ALL ON FUNCTION mp_keyword_matches(text[], tsquery, boolean, real) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mp_keyword_matches(text[], tsquery, boolean, real) TO memplane_app;

-- Every search bumps its hits' usage counters (last_used_at, use_count). With full pages the new
-- row version lands on another page, and every index takes it, the two HNSW graphs included;
-- with room left on the page it is a heap-only update that no index sees. Measured on 5,000 rows
-- (bench/README.md): updating 10 hits took 66 ms at fillfactor 100, 19 at 90, 5.5 at 80. Pages
-- written before this migration keep no room until the table is rewritten (VACUUM FULL).
ALTER TABLE memories SET (fillfactor = 80);
