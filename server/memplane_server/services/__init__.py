"""Use cases: write, search, reflect, forget, memories, admin, operations."""
