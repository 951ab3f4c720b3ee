"""PostgreSQL stores: pool, migrations, memories, tenancy, jobs."""
