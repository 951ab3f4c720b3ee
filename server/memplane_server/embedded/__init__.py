"""PostgreSQL and Redis run by the server itself, for deployments without external services."""

from ._process import EmbeddedError
from .postgres import EmbeddedPostgres
from .redis import EmbeddedRedis

# Not Guardian: its module runs as `python -m`, which must not find it imported already.
__all__ = ["EmbeddedError", "EmbeddedPostgres", "EmbeddedRedis"]
