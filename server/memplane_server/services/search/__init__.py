"""The search wing: the Search use case, its retrieval channels (vector, lexical, graph,
session), the second pass, usage counters and stage timings."""
