"""The SQL of forgetting: erasure of a user and lifecycle policies."""
