"""Reciprocal rank fusion of ranked candidate lists."""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

RRF_K = 60


def reciprocal_rank_fusion(
    channels: Mapping[str, Sequence[Hashable]], weights: Mapping[str, float] | None = None, k: int = RRF_K
) -> dict[Hashable, tuple[float, dict[str, int]]]:
    """Fused score and per-channel 1-based rank for every candidate of any channel."""
    fused: dict[Hashable, tuple[float, dict[str, int]]] = {}
    for name, ranked in channels.items():
        weight = (weights or {}).get(name, 1.0)
        for rank, key in enumerate(ranked, start=1):
            score, ranks = fused.get(key, (0.0, {}))
            ranks[name] = rank
            fused[key] = (score + weight / (k + rank), ranks)
    return fused
