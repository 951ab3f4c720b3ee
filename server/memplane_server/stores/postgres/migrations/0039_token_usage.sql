-- LLM tokens spent per tenant, UTC day, stage and model (one upsert per completion: ChatModel adds
-- each answer's tokens to its row), and the daily token budgets platform admins set per tenant.
-- Both are the tenant's own rows, read and written in its session (row-level security, as
-- content_policies); a budget is set by a platform admin, as the owner.
CREATE TABLE llm_token_usage (
    tenant_id      text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    day            date NOT NULL,
    stage          text NOT NULL,
    model          text NOT NULL,
    input_tokens   bigint NOT NULL CHECK (input_tokens >= 0),
    output_tokens  bigint NOT NULL CHECK (output_tokens >= 0),
    completions    bigint NOT NULL CHECK (completions >= 0),
    PRIMARY KEY (tenant_id, day, stage, model)
);
GRANT SELECT, INSERT, UPDATE ON llm_token_usage TO memplane_app;
ALTER TABLE llm_token_usage ENABLE ROW LEVEL SECURITY;
CREATE POLICY llm_token_usage_tenant ON llm_token_usage FOR ALL TO memplane_app
    USING (tenant_id = mp_tenant()) WITH CHECK (tenant_id = mp_tenant());

CREATE TABLE llm_token_budgets (
    tenant_id       text PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    tokens_per_day  bigint NOT NULL CHECK (tokens_per_day >= 0),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    updated_by      text NOT NULL
);
GRANT SELECT ON llm_token_budgets TO memplane_app;
ALTER TABLE llm_token_budgets ENABLE ROW LEVEL SECURITY;
CREATE POLICY llm_token_budgets_tenant ON llm_token_budgets FOR SELECT TO memplane_app
    USING (tenant_id = mp_tenant());
