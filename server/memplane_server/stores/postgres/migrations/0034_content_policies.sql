-- Content policies: what a write does with the secrets and personal data its detectors find
-- (core/content/policy.py reads the rules: detector or category name -> off/tag/redact/refuse).
--
-- A tenant's policy is the tenant's own row, read and written in its session (row-level security,
-- as lifecycle_policies). A domain's policy belongs to the platform, as domains do: set by a
-- platform admin, read by the write path of every member tenant.
CREATE TABLE content_policies (
    tenant_id   text PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    rules       jsonb NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    updated_by  text NOT NULL
);
GRANT SELECT, INSERT, UPDATE, DELETE ON content_policies TO memplane_app;
ALTER TABLE content_policies ENABLE ROW LEVEL SECURITY;
CREATE POLICY content_policies_tenant ON content_policies FOR ALL TO memplane_app
    USING (tenant_id = mp_tenant()) WITH CHECK (tenant_id = mp_tenant());

CREATE TABLE domain_content_policies (
    domain      text PRIMARY KEY REFERENCES domains(name) ON DELETE CASCADE,
    rules       jsonb NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    updated_by  text NOT NULL
);
