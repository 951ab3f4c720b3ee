"""near_duplicate_groups: which session memories reflect merges (services/reflection/reflect.py)."""
from __future__ import annotations

import numpy as np

from memplane_server.core.reflection.reflection import near_duplicate_groups

KEY = ("private", None, "bot", "fact")


def unit(*rows) -> np.ndarray:
    v = np.asarray(rows, dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_no_vectors_have_no_groups():
    assert near_duplicate_groups(np.zeros((0, 3), dtype=np.float32), [], 0.9) == []


def test_identical_vectors_with_equal_keys_are_grouped():
    assert near_duplicate_groups(unit([1, 0], [1, 0]), [KEY, KEY], 0.95) == [[0, 1]]


def test_similar_vectors_with_different_keys_are_not_grouped():
    other = ("private", None, "bot", "preference")
    assert near_duplicate_groups(unit([1, 0], [1, 0]), [KEY, other], 0.95) == []


def test_vectors_below_threshold_are_not_grouped():
    assert near_duplicate_groups(unit([1, 0], [1, 1]), [KEY, KEY], 0.95) == []  # cosine ~0.707


def test_cosine_exactly_at_threshold_is_grouped():
    vectors = np.array([[1.0, 0.0], [0.5, np.sqrt(0.75)]])  # cosine 0.5 exactly
    assert near_duplicate_groups(vectors, [KEY, KEY], 0.5) == [[0, 1]]


def test_grouping_is_transitive_through_a_middle_vector():
    # a~b and b~c pass 0.9, a~c (cosine ~0.82) does not; all three still form one group.
    vectors = unit([1, 0], [np.cos(0.3), np.sin(0.3)], [np.cos(0.6), np.sin(0.6)])
    a, b, c = vectors
    assert float(a @ c) < 0.9 <= float(a @ b)
    assert near_duplicate_groups(vectors, [KEY] * 3, 0.9) == [[0, 1, 2]]


def test_singletons_are_left_out_and_groups_list_indices_oldest_first():
    vectors = unit([1, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 0])
    assert near_duplicate_groups(vectors, [KEY] * 5, 0.99) == [[0, 2], [1, 4]]
