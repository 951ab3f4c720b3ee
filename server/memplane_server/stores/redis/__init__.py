"""Redis stores: working memory and idempotency records."""
