"""The SQL of Search: nearest-neighbour and lexical statements, their plans, keyword
statistics, feedback reads, the entity index and session digests."""
