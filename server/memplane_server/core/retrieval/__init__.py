"""The retrieval rules of Search: tokens, fusion, scoring, ranking, intent, time expressions,
transcripts and pseudo-relevance feedback (BM25 is computed where the keyword matches are read:
stores/postgres/search/lexical.py)."""
