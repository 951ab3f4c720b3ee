"""Who is calling and what they may see: callers, tenancy, API keys, request ids, rate
buckets and the tenant whose work is being done."""
