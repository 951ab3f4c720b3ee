-- A memory's two 384-d vectors (1.5 kB each) were stored out of line, pgvector's default
-- (EXTERNAL): scoring a LoCoMo conversation's 419 rows read 2,698 buffers, two TOAST lookups per
-- row, and the vector channels took 6.3 and 5.3 ms where the same scan over inline vectors takes
-- 5.0 and 4.2 (bench/README.md, peers.py). With MAIN they stay in the row unless it outgrows a
-- page; text columns move out first. Rows written before keep theirs out of line until rewritten
-- (an update, or VACUUM FULL memories: docs/operations.md).
ALTER TABLE memories ALTER COLUMN embedding SET STORAGE MAIN, ALTER COLUMN context_embedding SET STORAGE MAIN;
