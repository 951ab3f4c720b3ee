-- Users' keys live outside the database, in a folder of their own (stores/user_keys.py), so that
-- erasing a user destroys a key no backup holds. The folder's id is recorded here on first use: a
-- server given another folder (an empty one after a restore, one per replica) refuses to start
-- rather than reading every user's memories as erased. Only the owner reads it.
CREATE TABLE user_key_store (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    store_id    text NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);

-- A memory given to another user moves to that user's key, its texts sealed anew: unlike a
-- re-seal, that is a caller's change, which may have changed what the memory says with it.
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
                AND (n.sealed_key IS NOT DISTINCT FROM o.sealed_key OR n.user_id IS DISTINCT FROM o.user_id))
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
