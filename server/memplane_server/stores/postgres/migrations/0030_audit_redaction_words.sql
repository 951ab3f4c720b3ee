-- An erasure redacted every string of the audit log that merely contained the user id: erasing
-- "a" turned other agents' ids, key ids and admin actions into "[erased]" soup. Now the caller
-- passes the user id as a word of its own (core/erasure.word_pattern: not inside another id,
-- word or address), and only such words become '[erased]'; keys and everything else stay.
DROP FUNCTION mp_redact(jsonb, text);
CREATE FUNCTION mp_redact_words(doc jsonb, pattern text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE SET search_path = public, pg_temp AS $$
BEGIN
    CASE jsonb_typeof(doc)
        WHEN 'object' THEN
            RETURN (SELECT coalesce(jsonb_object_agg(k, mp_redact_words(v, pattern)), '{}'::jsonb)
                    FROM jsonb_each(doc) e(k, v));
        WHEN 'array' THEN
            RETURN (SELECT coalesce(jsonb_agg(mp_redact_words(v, pattern) ORDER BY i), '[]'::jsonb)
                    FROM jsonb_array_elements(doc) WITH ORDINALITY a(v, i));
        WHEN 'string' THEN
            RETURN to_jsonb(regexp_replace(doc #>> '{}', pattern, '[erased]', 'g'));
        ELSE
            RETURN doc;
    END CASE;
END
$$;
