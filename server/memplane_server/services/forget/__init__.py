"""The forget wing: Forget by ids or filter, erasure of a user, the copies outside PostgreSQL,
and lifecycle policies."""
