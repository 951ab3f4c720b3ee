-- What each tenant uses, per UTC day, for capacity planning and charge-back (core/metering.py).
-- usage_counts: calls by method and texts embedded, counted in each server process and added here
-- every few seconds, off the request path. usage_stored: memories and bytes by layer and scope,
-- rolled up from memories by a background pass (the day's last pass stands for the day). Written by
-- the server as the owner (across tenants, like the write requests' pruning); read in a tenant's
-- session (row-level security) or by a platform admin's report as the owner.
CREATE TABLE usage_counts (
    tenant_id  text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    day        date NOT NULL,
    metric     text NOT NULL,
    name       text NOT NULL,
    value      bigint NOT NULL CHECK (value >= 0),
    PRIMARY KEY (tenant_id, day, metric, name)
);
GRANT SELECT ON usage_counts TO memplane_app;
ALTER TABLE usage_counts ENABLE ROW LEVEL SECURITY;
CREATE POLICY usage_counts_tenant ON usage_counts FOR SELECT TO memplane_app USING (tenant_id = mp_tenant());

CREATE TABLE usage_stored (
    tenant_id     text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    day           date NOT NULL,
    layer         text NOT NULL,
    scope         text NOT NULL,
    memories      bigint NOT NULL CHECK (memories >= 0),
    bytes         bigint NOT NULL CHECK (bytes >= 0),
    rolled_up_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, day, layer, scope)
);
GRANT SELECT ON usage_stored TO memplane_app;
ALTER TABLE usage_stored ENABLE ROW LEVEL SECURITY;
CREATE POLICY usage_stored_tenant ON usage_stored FOR SELECT TO memplane_app USING (tenant_id = mp_tenant());
