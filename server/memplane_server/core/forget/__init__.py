"""Forgetting's rules: erasure of a user and lifecycle policies."""
