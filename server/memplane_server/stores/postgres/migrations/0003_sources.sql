-- Every observation behind a memory: its own source, sources re-confirming it, and the sources
-- of near-duplicates merged into it.
ALTER TABLE memories ADD COLUMN sources jsonb NOT NULL DEFAULT '[]';
UPDATE memories SET sources = jsonb_build_array(jsonb_build_object('type', source_type, 'id', source_id))
    WHERE source_type IS NOT NULL OR source_id IS NOT NULL;
