-- Consolidation (issue 13): a cluster of similar lessons or procedures abstracted into one more
-- general memory. The sources stay, pointing at it, and Search ranks them below it; when the
-- consolidation leaves service (superseded, forgotten, erased) its sources rank as before.
ALTER TABLE memories ADD COLUMN consolidated_into uuid;
CREATE INDEX memories_consolidated_into ON memories (consolidated_into) WHERE consolidated_into IS NOT NULL;

CREATE FUNCTION mp_release_consolidated() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    UPDATE memories SET consolidated_into = NULL WHERE consolidated_into = OLD.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_consolidation_retired AFTER UPDATE ON memories FOR EACH ROW
    WHEN (OLD.source_type = 'consolidation' AND OLD.status = 'active' AND NEW.status <> 'active')
    EXECUTE FUNCTION mp_release_consolidated();
CREATE TRIGGER memories_consolidation_deleted AFTER DELETE ON memories FOR EACH ROW
    WHEN (OLD.source_type = 'consolidation')
    EXECUTE FUNCTION mp_release_consolidated();
