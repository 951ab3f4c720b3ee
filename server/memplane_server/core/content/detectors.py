"""What a text holds that a content policy acts on: every detector's findings, merged so that each
character belongs to at most one, ready to be tagged or replaced."""
from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from . import personal, secret_formats
from .entropy import high_entropy_token

_SCANNERS: dict[str, Callable[[str], Iterable[tuple[int, int]]]] = {
    **secret_formats.SCANNERS,
    # Last of the secrets: a key of a known format is also a random token, and keeps its own name.
    "high_entropy_token": high_entropy_token,
    **personal.SCANNERS,
}
DETECTORS: dict[str, str] = {name: "personal" if name in personal.SCANNERS else "secret" for name in _SCANNERS}
_RANK = {name: rank for rank, name in enumerate(DETECTORS)}


@dataclass(frozen=True)
class Finding:
    detector: str   # a name from DETECTORS
    category: str   # "secret" or "personal"
    start: int      # span in the scanned text (str indices)
    end: int


def find(text: str, detectors: Collection[str] | None = None) -> list[Finding]:
    """Non-overlapping findings sorted by start. None = every detector. Where spans overlap keep one:
    a secret over personal data, else the longer."""
    if detectors is None:
        names: Collection[str] = DETECTORS
    else:
        unknown = set(detectors) - DETECTORS.keys()
        if unknown:
            raise ValueError(f"unknown detectors: {sorted(unknown)}")
        names = detectors
    found = [Finding(name, DETECTORS[name], start, end)
             for name in names for start, end in _SCANNERS[name](text) if end > start]
    return _without_overlaps(found)


def _without_overlaps(found: list[Finding]) -> list[Finding]:
    """Keeps findings best first (a secret before personal data, then the longer, then the earlier
    detector name) wherever they do not overlap one already kept."""
    found.sort(key=lambda f: (f.category != "secret", f.start - f.end, _RANK[f.detector], f.start))
    starts: list[int] = []
    kept: list[Finding] = []
    for finding in found:
        i = bisect.bisect_left(starts, finding.start)
        if i > 0 and kept[i - 1].end > finding.start or i < len(kept) and kept[i].start < finding.end:
            continue
        starts.insert(i, finding.start)
        kept.insert(i, finding)
    return kept
