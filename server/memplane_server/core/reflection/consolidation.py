"""Which lessons and procedures of one scope say the same kind of thing, so consolidation can merge them.

Two memories are similar when their vectors are close AND they share an entity or enough of their
words. Closeness alone does not separate with the local embedder: passage cosines are compressed
("Drain the queue before rotating keys" against "Run the migrations before deploying" scores
0.925, above the true pair "...empty the queue first when you rotate keys" at 0.914), while the
true pairs share their content words (Jaccard of keyword stems 0.2-0.35 against 0.1 for the
unrelated). Clusters are the connected groups of similar pairs within one owner and kind.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence

import numpy as np

from ..grouping import block_rows, close_pairs, connected_groups, parts
from ..model import MemoryRecord

CLOSE = 0.88
SHARED_WORDS = 0.2


def _owner(r: MemoryRecord) -> tuple:
    return (r.scope, r.domain, r.agent_id if r.scope.value == "private" else None, r.kind)


def _ids(values: Sequence[Hashable | None]) -> np.ndarray:
    """Equal values, equal ids; None is -1, equal to nothing."""
    seen: dict[Hashable, int] = {}
    return np.asarray([-1 if v is None else seen.setdefault(v, len(seen)) for v in values], dtype=np.int64)


class _Words:
    """The keyword sets of a part's rows as token ids, row after row, to count what rows share
    without Python sets."""

    def __init__(self, words: list[set[str]]) -> None:
        vocabulary: dict[str, int] = {}
        tokens = [vocabulary.setdefault(w, len(vocabulary)) for ws in words for w in ws]
        self.vocabulary = len(vocabulary)
        # A last token that no row holds: the run of an empty row at the end starts on it.
        self.tokens = np.asarray(tokens + [self.vocabulary], dtype=np.int64)
        self.sizes = np.asarray([len(ws) for ws in words], dtype=np.int64)
        self.starts = np.cumsum(self.sizes) - self.sizes

    def shared(self, start: int, stop: int) -> np.ndarray:
        """How many tokens each row of start:stop shares with each row from start on (an empty row's
        column holds nonsense: callers leave empty rows out)."""
        rows = np.arange(start, stop)
        present = np.zeros((rows.size, self.vocabulary + 1), dtype=np.uint8)
        present[np.repeat(rows - start, self.sizes[rows]),
                self.tokens[self.starts[start]:self.starts[stop - 1] + self.sizes[stop - 1]]] = 1
        return np.add.reduceat(present[:, self.tokens[self.starts[start]:]], self.starts[start:] - self.starts[start],
                               axis=1, dtype=np.int32)


def clusters(records: list[MemoryRecord], vectors: np.ndarray, words: list[set[str]]) -> list[list[int]]:
    """Groups (indices, oldest first) of two or more similar memories."""
    entities = _ids([r.entity for r in records])

    def links() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for part in parts([_owner(r) for r in records]):
            own = _Words([words[k] for k in part])
            # A block's arrays: its cosines, its rows' keyword indicators and the tokens they meet.
            width = max(len(part), own.vocabulary + 1, len(own.tokens))
            for start, i, j in close_pairs(vectors[part], CLOSE, block_rows(width)):
                linked = (entities[part[i]] >= 0) & (entities[part[i]] == entities[part[j]])
                rest = ~linked & (own.sizes[i] > 0) & (own.sizes[j] > 0)
                if rest.any():
                    ri, rj = i[rest], j[rest]
                    shared = own.shared(start, int(ri.max()) + 1)[ri - start, rj - start]
                    union = own.sizes[ri] + own.sizes[rj] - shared
                    linked[rest] = shared.astype(np.float64) / union >= SHARED_WORDS
                yield part[i[linked]], part[j[linked]]

    return connected_groups(len(records), links())
