-- Users' keys live outside the database, in a folder of their own (stores/user_keys.py), so that
-- erasing a user destroys a key no backup holds. The folder's id is recorded here on first use: a
-- server given another folder (an empty one after a restore, one per replica) refuses to start
-- rather than reading every user's memories as erased. Only the owner reads it.
CREATE TABLE user_key_store (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    store_id    text NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);
