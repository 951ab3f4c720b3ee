-- Writes carrying a request_id, recorded in the same transaction as the memories they stored.
-- Redis answers repeats while it holds the response; this answers a retry that Redis cannot
-- (the server died after the commit and before recording the response there), so a write is
-- stored once however the call ended.
CREATE TABLE write_requests (
    tenant_id    text NOT NULL,
    request_key  text NOT NULL,  -- sha256 of the caller (tenant, key, agent) and the request_id
    fingerprint  text NOT NULL,  -- sha256 of the request, to refuse a reused id
    memory_ids   uuid[] NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, request_key)
);
CREATE INDEX write_requests_age ON write_requests (created_at);

GRANT SELECT, INSERT, UPDATE ON write_requests TO memplane_app;
ALTER TABLE write_requests ENABLE ROW LEVEL SECURITY;
CREATE POLICY write_requests_own ON write_requests TO memplane_app
    USING (tenant_id = mp_tenant()) WITH CHECK (tenant_id = mp_tenant());
