-- A search that found nothing keeps its query text as the signal's reason, and the query of a search
-- filtered to a user is about that user: the erasure of the user (issue 14) removes it, so the row
-- names the user it was about.
ALTER TABLE reflection_decisions ADD COLUMN user_id text;
CREATE INDEX reflection_decisions_user ON reflection_decisions (tenant_id, user_id) WHERE user_id IS NOT NULL;
