"""AdminClient and AsyncAdminClient: tenants, agents, API keys, domains, grants, the audit log
and lifecycle policies. Both are written once, as AsyncAdminClient in _admin_aio.py; AdminClient
is generated from it into _admin_sync.py."""
from .aio import AsyncAdminClient
from .client import AdminClient

__all__ = ["AdminClient", "AsyncAdminClient"]
