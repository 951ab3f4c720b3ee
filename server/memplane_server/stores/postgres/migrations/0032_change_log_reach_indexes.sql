-- A Watch resumed from an old position with a filter that matches nothing walked the log's one
-- position index through every tenant's changes of the retention window (24 h of all tenants'
-- writes) to find none. Its read now also names the rows it can reach at all (its tenant's, and
-- the domains it reads: ChangeStore.read), and these indexes let PostgreSQL find just those
-- within the positions asked, so the walk is bounded by the caller's tenant and domains.
CREATE INDEX memory_changes_tenant_position ON memory_changes (tenant_id, position);
CREATE INDEX memory_changes_domain_position ON memory_changes (domain, position) WHERE domain IS NOT NULL;
