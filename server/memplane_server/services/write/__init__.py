"""The write wing: Write, LLM extraction when asked, the background turn windows and session
digests, and re-embedding."""
