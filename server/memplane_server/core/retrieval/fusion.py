"""Reciprocal rank fusion of ranked candidate lists."""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

RRF_K = 60
K = TypeVar("K", bound=Hashable)


def reciprocal_rank_fusion(
    channels: Mapping[str, Sequence[K]], weights: Mapping[str, float] | None = None, k: int = RRF_K
) -> dict[K, tuple[float, dict[str, int]]]:
    """Fused score and per-channel 1-based rank for every candidate of any channel."""
    fused: dict[K, tuple[float, dict[str, int]]] = {}
    for name, ranked in channels.items():
        weight = (weights or {}).get(name, 1.0)
        for rank, key in enumerate(ranked, start=1):
            score, ranks = fused.get(key, (0.0, {}))
            ranks[name] = rank
            fused[key] = (score + weight / (k + rank), ranks)
    return fused
