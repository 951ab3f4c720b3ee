"""Who may call and how often: API keys to callers, rate limits, request ids that run once,
outages as callers see them, and reads routed to a standby."""
