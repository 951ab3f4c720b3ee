"""Background job workers."""
