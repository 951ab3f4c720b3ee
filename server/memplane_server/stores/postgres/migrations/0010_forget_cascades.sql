-- Forgetting users can trust (issue 14): what was derived from a forgotten memory goes with it.
--
-- Every derived memory (session summaries, facts extracted from a turn, what a session
-- reflection distilled) records its sources in memory_sources (0009). Here, like the staleness
-- of 0009, in triggers running as the owner, so every path and every caller is covered:
--   * a source soft-forgotten (status 'deleted'): a derived summary turns stale and is rebuilt
--     (0009); any other derived memory cannot be recomputed and is soft-forgotten with it;
--   * a source hard-deleted: every memory derived from it, whatever its status, is erased with
--     its history (one 'erased' marker stays, as for a hard forget); a current session (or user)
--     summary is rebuilt by a job from what its session (or the user's memories) holds now; jobs whose payload or result name an
--     erased memory lose those ids, their summary text and (finished reflections) their input.
-- A derived memory is written only while its sources exist (mp_sources_alive), so a rebuild or
-- an extraction that read a source before it was forgotten cannot bring its text back.
-- A consolidation (0015: a general memory linked to the lessons or procedures it stands for) is a
-- derived memory like the others: forgotten or erased with any of its sources, whereupon 0015's
-- triggers give the remaining sources their rank back. A source superseded or changed leaves it
-- as it is (only summaries turn stale: nothing rebuilds a stale consolidation).

-- Soft cascade: derived memories that are not summaries are forgotten with their source.
CREATE FUNCTION mp_forget_derived(source_ids uuid[]) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
    WITH forgotten AS (
        UPDATE memories m SET status = 'deleted', updated_at = clock_timestamp()
            FROM (SELECT DISTINCT ON (tenant_id, memory_id) tenant_id, memory_id, source_id
                  FROM memory_sources WHERE source_id = ANY (source_ids)
                  ORDER BY tenant_id, memory_id, source_id) s
            WHERE m.tenant_id = s.tenant_id AND m.id = s.memory_id AND m.kind <> 'summary'
              AND m.status <> 'deleted'
            RETURNING m.*, s.source_id AS changed_source
    )
    INSERT INTO memory_history (tenant_id, memory_id, action, snapshot, actor, reason)
        SELECT tenant_id, id, 'deleted',
               to_jsonb(forgotten) - 'embedding' - 'context_embedding' - 'keywords' - 'context_keywords'
                   - 'context_of' - 'changed_source',
               'system', format('derived from %s, which was forgotten', changed_source)
        FROM forgotten;
$$;

CREATE OR REPLACE FUNCTION mp_stale_on_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF OLD.status IN ('active', 'pending') THEN
        PERFORM mp_mark_stale(ARRAY[OLD.id],
                              CASE WHEN NEW.status IS DISTINCT FROM OLD.status THEN NEW.status ELSE 'updated' END);
    END IF;
    IF NEW.status = 'deleted' AND OLD.status <> 'deleted' THEN
        PERFORM mp_forget_derived(ARRAY[OLD.id]);
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER memories_stale_on_change ON memories;
CREATE TRIGGER memories_stale_on_change AFTER UPDATE ON memories FOR EACH ROW
    WHEN ((OLD.status IN ('active', 'pending') AND (
        NEW.status IS DISTINCT FROM OLD.status OR NEW.content IS DISTINCT FROM OLD.content
        OR NEW.value IS DISTINCT FROM OLD.value OR NEW.entity IS DISTINCT FROM OLD.entity
        OR NEW.attribute IS DISTINCT FROM OLD.attribute))
        OR (NEW.status = 'deleted' AND OLD.status <> 'deleted'))
    EXECUTE FUNCTION mp_stale_on_change();

-- Every memory derived from the sources, directly or through other derived memories (not the
-- sources themselves). Used by the hard cascade and, before a forget, to know what it reaches.
CREATE FUNCTION mp_derived(source_ids uuid[])
RETURNS TABLE (tenant_id text, id uuid, kind text, status text, session_id text, user_id text, content text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
    WITH RECURSIVE d(tenant_id, id) AS (
        SELECT s.tenant_id, s.memory_id FROM memory_sources s WHERE s.source_id = ANY (source_ids)
        UNION
        SELECT s.tenant_id, s.memory_id FROM memory_sources s JOIN d ON s.source_id = d.id
    )
    SELECT m.tenant_id, m.id, m.kind, m.status, m.session_id, m.user_id, m.content
    FROM d JOIN memories m ON m.tenant_id = d.tenant_id AND m.id = d.id
    WHERE NOT (m.id = ANY (source_ids));
$$;
REVOKE ALL ON FUNCTION mp_derived(uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mp_derived(uuid[]) TO memplane_app;

-- Hard cascade, one level (deleting the derived rows fires the trigger again for the next).
CREATE FUNCTION mp_erase_derived(source_ids uuid[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    tenant_ids text[];
    ids uuid[];
BEGIN
    SELECT coalesce(array_agg(x.tenant_id), '{}'), coalesce(array_agg(x.memory_id), '{}') INTO tenant_ids, ids
        FROM (SELECT DISTINCT s.tenant_id, s.memory_id FROM memory_sources s
              WHERE s.source_id = ANY (source_ids) AND NOT (s.memory_id = ANY (source_ids))) x;
    IF cardinality(ids) = 0 THEN
        RETURN;
    END IF;
    -- The session's (or user's) current summary is rebuilt from what the session (or the user's
    -- memories) hold now. The job names the session or user, since the summary it replaces is
    -- gone; an erasure of a user removes the jobs about that user afterwards.
    INSERT INTO jobs (tenant_id, id, type, state, payload, caller)
        SELECT m.tenant_id, gen_random_uuid(), 'refresh_summary', 'pending',
               jsonb_build_object('summary_id', m.id, 'erased', true, 'source_type', m.source_type,
                                  'session_id', m.session_id, 'user_id', m.user_id, 'scope', m.scope,
                                  'domain', m.domain),
               jsonb_build_object('key_id', 'system:refresh', 'role', 'writer', 'tenant_id', m.tenant_id,
                                  'agent_id', m.agent_id,
                                  'domains', CASE WHEN m.domain IS NULL THEN '{}'::jsonb
                                                  ELSE jsonb_build_object(m.domain, true) END)
        FROM unnest(tenant_ids, ids) AS e(tenant_id, id)
        JOIN memories m ON m.tenant_id = e.tenant_id AND m.id = e.id
        JOIN tenants t ON t.id = m.tenant_id
        WHERE m.kind = 'summary' AND m.status IN ('active', 'stale', 'pending')
          AND ((m.source_type = 'session' AND m.session_id IS NOT NULL)
               OR (m.source_type = 'user' AND m.user_id IS NOT NULL));
    DELETE FROM memory_history h USING unnest(tenant_ids, ids) AS e(tenant_id, id)
        WHERE h.tenant_id = e.tenant_id AND h.memory_id = e.id;
    INSERT INTO memory_history (tenant_id, memory_id, action, snapshot, actor, reason)
        SELECT e.tenant_id, e.id, 'erased', '{}', 'system', 'derived from an erased memory'
        FROM unnest(tenant_ids, ids) AS e(tenant_id, id);
    DELETE FROM memories m USING unnest(tenant_ids, ids) AS e(tenant_id, id)
        WHERE m.tenant_id = e.tenant_id AND m.id = e.id;
END
$$;

-- Jobs naming erased memories: the ids leave their payload and result, the result's summary text
-- goes, and a finished reflection whose output was erased loses its input (a task trajectory).
CREATE FUNCTION mp_scrub_jobs(tenant_ids text[], gone text[]) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
    UPDATE jobs j SET
        result = CASE WHEN j.result->'memory_ids' ?| gone THEN
                     jsonb_build_object('memory_ids',
                         coalesce((SELECT jsonb_agg(x) FROM jsonb_array_elements_text(j.result->'memory_ids') x
                                   WHERE x <> ALL (gone)), '[]'::jsonb),
                         'summary', '')
                 ELSE j.result END,
        payload = CASE
            WHEN j.type = 'reflect' AND j.state IN ('succeeded', 'failed', 'cancelled')
                 AND j.result->'memory_ids' ?| gone THEN '{"erased": true}'::jsonb
            WHEN j.payload->'turn_ids' ?| gone THEN
                jsonb_set(j.payload, '{turn_ids}',
                          coalesce((SELECT jsonb_agg(x) FROM jsonb_array_elements_text(j.payload->'turn_ids') x
                                    WHERE x <> ALL (gone)), '[]'::jsonb))
            ELSE j.payload END,
        updated_at = now()
    WHERE j.tenant_id = ANY (tenant_ids) AND (j.result->'memory_ids' ?| gone OR j.payload->'turn_ids' ?| gone);
$$;

CREATE OR REPLACE FUNCTION mp_stale_on_delete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    gone uuid[];
BEGIN
    SELECT coalesce(array_agg(id), '{}') INTO gone FROM old_rows;
    PERFORM mp_erase_derived(gone);
    DELETE FROM memory_sources s WHERE s.source_id = ANY (gone);
    PERFORM mp_scrub_jobs((SELECT array_agg(DISTINCT tenant_id) FROM old_rows),
                          (SELECT array_agg(id::text) FROM old_rows));
    -- Term counts (keyword_stats, migration 0013) list a tenant's common terms, which in a small
    -- tenant are any of its words: dropped, so the background work counts them again without
    -- the erased text (until then every term counts as rare). Resolved when this runs, after 0013.
    DELETE FROM keyword_stats k WHERE k.tenant_id IN (SELECT DISTINCT o.tenant_id FROM old_rows o);
    -- Recorded write requests (write_requests) hold ids, never content, and answer a repeat with
    -- the memories that still exist; cleaning them here would scan a tenant's day of writes on
    -- every delete, so only an erasure of a user does.
    RETURN NULL;
END
$$;

-- True when every source exists and is not forgotten; locks them (FOR SHARE) until the writing
-- transaction ends, so a forget of one of them waits for the derived memory and then reaches it.
CREATE FUNCTION mp_sources_alive(source_ids uuid[]) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
    SELECT count(*) = cardinality(source_ids) FROM (
        SELECT id, status FROM memories WHERE id = ANY (source_ids) ORDER BY id FOR SHARE
    ) x WHERE x.status <> 'deleted';
$$;
REVOKE ALL ON FUNCTION mp_sources_alive(uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mp_sources_alive(uuid[]) TO memplane_app;

-- Every string inside a JSON document with `needle` replaced by '[erased]' (keys untouched):
-- an erasure redacts the audit log instead of deleting its entries.
CREATE FUNCTION mp_redact(doc jsonb, needle text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    CASE jsonb_typeof(doc)
        WHEN 'object' THEN
            RETURN (SELECT coalesce(jsonb_object_agg(k, mp_redact(v, needle)), '{}'::jsonb) FROM jsonb_each(doc) e(k, v));
        WHEN 'array' THEN
            RETURN (SELECT coalesce(jsonb_agg(mp_redact(v, needle) ORDER BY i), '[]'::jsonb)
                    FROM jsonb_array_elements(doc) WITH ORDINALITY a(v, i));
        WHEN 'string' THEN
            RETURN CASE WHEN strpos(doc #>> '{}', needle) > 0
                        THEN to_jsonb(replace(doc #>> '{}', needle, '[erased]')) ELSE doc END;
        ELSE
            RETURN doc;
    END CASE;
END
$$;
