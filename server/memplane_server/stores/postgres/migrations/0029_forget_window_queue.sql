-- Turn windows (0028's mp_mark_context): a hard forget queued every session of its batch for the
-- window builder, also a session whose turns it had all deleted (a forget by filter keeps a
-- session's turns in one batch, so that is most of them). The builder then leased each such
-- session, read its turns (none), saved nothing and finished it: four statements a session in the
-- server beside the forget's later batches (bench/README.md, forget.py, fourth pass).
-- Now a session left without turns leaves the queue in the same transaction. It is still marked
-- first, as before: the mark waits for a writer queueing the session at the same time and
-- invalidates a build in flight (its save checks the mark, DigestStore.save), and the DELETE's own
-- snapshot, taken after that wait, sees a turn such a writer committed, whose session then stays.
CREATE OR REPLACE FUNCTION mp_mark_context(tenant_ids text[], session_ids text[], clear boolean)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
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
