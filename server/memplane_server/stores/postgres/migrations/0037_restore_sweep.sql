-- A restore brings back the memories of users erased since its backup, sealed under keys that no
-- longer exist; they are removed by its sweep, which needs the users' keys folder (0036). Until
-- that sweep is done a row here keeps every server and worker from starting: otherwise they would
-- serve those rows' user ids, attributes and times. Kept in the database, not beside one server,
-- so every process sharing it sees it. Only the owner reads it.
CREATE TABLE restore_sweep_pending (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    restored_at timestamptz NOT NULL DEFAULT now()
);
