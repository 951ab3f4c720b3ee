"""What a write derives and decides: observations, conflicts, entities, emotion, turn windows
and session digests."""
