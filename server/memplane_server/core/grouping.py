"""Groups of rows linked pairwise by close vectors (and whatever else a caller requires of a pair),
for consolidation's clusters and reflection's near-duplicates.

Comparing every pair in Python took 7.6 s for 2,000 lessons, all of it on the event loop. Here the rows are first
split by the key a linked pair must share, so pairs across keys are never compared; each part's
cosines come from matrix products of at most BLOCK_CELLS cells, so memory stays bounded whatever
the number of rows; the links join with a vectorised union-find. The groups are the connected
components the pairwise loop found: indices ascending, ordered by their first index.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence

import numpy as np

# Cells of one block's cosine matrix (float32: 16 MB), whatever the number of rows.
BLOCK_CELLS = 1 << 22


def parts(keys: Sequence[Hashable]) -> list[np.ndarray]:
    """The indices (ascending) of each key's rows, keys of a single row left out."""
    by_key: dict[Hashable, list[int]] = {}
    for i, key in enumerate(keys):
        by_key.setdefault(key, []).append(i)
    return [np.asarray(rows) for rows in by_key.values() if len(rows) > 1]


def block_rows(width: int) -> int:
    """Rows per block when a block's arrays hold up to `width` cells per row."""
    return max(1, BLOCK_CELLS // max(width, 1))


def close_pairs(
    vectors: np.ndarray, threshold: float, rows: int | None = None,
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(i, j), i < j, with vectors[i] @ vectors[j] >= threshold, `rows` rows of the matrix at a time,
    each block's with its first row: i is within start:start + rows, j from start on."""
    n = len(vectors)
    step = rows or block_rows(n)
    for start in range(0, n, step):
        sims = vectors[start:start + step] @ vectors[start:].T
        i, j = np.nonzero(np.triu(sims >= threshold, 1))
        if i.size:
            yield start, i + start, j + start


def _roots(label: np.ndarray, x: np.ndarray) -> np.ndarray:
    r = label[x]
    while True:
        up = label[r]
        if np.array_equal(up, r):
            return r
        r = up


def connected_groups(n: int, links: Iterable[tuple[np.ndarray, np.ndarray]]) -> list[list[int]]:
    """The groups of two or more rows that links (pairs of index arrays) connect, each ascending,
    ordered by their first index."""
    label = np.arange(n)
    for a, b in links:
        while a.size:
            ra, rb = _roots(label, a), _roots(label, b)
            apart = ra != rb
            if not apart.any():
                break
            a, b, ra, rb = a[apart], b[apart], ra[apart], rb[apart]
            # A root only ever points to a smaller index: no cycles, and a group's root is its first row.
            np.minimum.at(label, np.maximum(ra, rb), np.minimum(ra, rb))
            label[a], label[b] = _roots(label, a), _roots(label, b)
    while not np.array_equal(label[label], label):
        label = label[label]
    order = np.argsort(label, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(label[order])) + 1)
    return [g.tolist() for g in groups if len(g) > 1]
