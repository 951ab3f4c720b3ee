"""All SQL and Redis access lives here."""
