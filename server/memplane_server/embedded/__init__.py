"""PostgreSQL and Redis run by the server itself, for deployments without external services."""

from ._process import EmbeddedError
from .postgres import EmbeddedPostgres
from .redis import EmbeddedRedis

__all__ = ["EmbeddedError", "EmbeddedPostgres", "EmbeddedRedis"]
