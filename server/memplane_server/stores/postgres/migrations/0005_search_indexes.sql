-- Indexes the 100k search benchmark asked for (bench/README.md, search_scale.py): a filter on
-- kind (the preferences query, kind filters) and a time range (the time channel) otherwise scan
-- the tenant's rows, because the planner cannot use the HNSW index for an empty or narrow set.
CREATE INDEX memories_tenant_kind ON memories (tenant_id, kind, status);
CREATE INDEX memories_tenant_occurred ON memories (tenant_id, occurred_at);
