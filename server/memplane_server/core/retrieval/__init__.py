"""The retrieval rules of Search: tokens, BM25, fusion, scoring, ranking, intent, time
expressions, transcripts and pseudo-relevance feedback."""
