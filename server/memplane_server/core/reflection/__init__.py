"""Reflection's rules: what a reflection asks, consolidation, foresight, triggers, decisions
and confidence."""
