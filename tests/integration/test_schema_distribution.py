"""The schema can be distributed by tenant_id (Citus, docs/scaling.md): every primary key, unique
index and foreign key of the migrated database leads with tenant_id, but for the listed ones."""
from __future__ import annotations

import asyncpg
import pytest

from memplane_server.stores.postgres.migrations import migrate
from tests.e2e.conftest import fresh_database

pytestmark = pytest.mark.asyncio(loop_scope="session")

# (table, constraint or index): why it does not lead with tenant_id.
EXCEPTIONS = {
    ("tenants", "tenants_pkey"): "its id is the tenant id: the distribution column itself",
    ("api_keys", "api_keys_pkey"): "global lookup (a key is found before its tenant is known; platform keys have"
                                   " none): a reference table",
    ("domains", "domains_pkey"): "domains span tenants: a reference table",
    ("domain_grants", "domain_grants_domain_fkey"): "a foreign key to the domains reference table",
    ("memories", "memories_domain_fkey"): "a foreign key to the domains reference table",
    ("domain_content_policies", "domain_content_policies_pkey"): "a domain's content policy: a reference table"
                                                                  " beside domains",
    ("domain_content_policies", "domain_content_policies_domain_fkey"): "a foreign key to the domains reference table",
    ("audit_events", "audit_events_pkey"): "platform events have no tenant: stays a local table",
    ("schema_migrations", "schema_migrations_pkey"): "migration bookkeeping, not tenant data",
    ("user_key_store", "user_key_store_pkey"): "the deployment's one users' key folder, not tenant data",
    ("restore_sweep_pending", "restore_sweep_pending_pkey"): "the deployment's one mark of an unswept restore,"
                                                            " not tenant data",
    # Unique by id alone: a uuid is unique anyway, but Citus cannot enforce these on a distributed
    # table; the migration that distributes the tables must drop them.
    ("jobs", "jobs_id"): "uuid uniqueness; drop before distributing",
    ("memories", "memories_id"): "uuid uniqueness; drop before distributing",
    # Watch's change log (migration 0007) is one sequence across tenants: readers walk it by position,
    # domain memories spanning tenants. Distributed, it would be a per-tenant log or stay local.
    ("memory_changes", "memory_changes_position"): "one global position order; a local table under Citus",
    ("memory_change_state", "memory_change_state_pkey"): "the log's single pruning row: a local table",
    ("memory_change_commits", "memory_change_commits_pkey"):
        "a transaction's marker to number its changes, gone at its commit: local, like the log's positions",
}


async def test_every_key_and_unique_index_leads_with_tenant_id_but_the_listed(services_urls):
    url = await fresh_database(services_urls[0], "memplane_schema_catalog")
    conn = await asyncpg.connect(url)
    try:
        await migrate(conn)
        constraints = await conn.fetch(
            "SELECT c.conrelid::regclass::text AS tbl, c.conname AS name,"
            " (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = c.conrelid AND a.attnum = c.conkey[1]) AS first"
            " FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace"
            " WHERE n.nspname = 'public' AND c.contype IN ('p', 'u', 'f')")
        unique_indexes = await conn.fetch(
            "SELECT i.indrelid::regclass::text AS tbl, i.indexrelid::regclass::text AS name,"
            " (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attnum = i.indkey[0]) AS first"
            " FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace"
            " WHERE n.nspname = 'public' AND i.indisunique")
    finally:
        await conn.close()
    not_led = {(r["tbl"], r["name"]) for r in [*constraints, *unique_indexes] if r["first"] != "tenant_id"}
    assert not_led == set(EXCEPTIONS)
