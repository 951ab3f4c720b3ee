"""Whole-database and whole-tenant moves: backups, tenant transfer and re-embedding."""
