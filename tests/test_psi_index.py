"""Lookups of 32-byte values by 8-byte prefix, including the rare values whose prefixes collide."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vsplit.psi.index import PointIndex, repeated_rows


def test_values_sharing_a_prefix_are_still_told_apart() -> None:
    values = np.zeros((4, 32), np.uint8)
    values[:, 8] = [1, 2, 3, 4]  # same 8-byte prefix, different values
    values[3, :8] = 7
    index = PointIndex(values)
    queries = values[[2, 0, 3, 1]].copy()
    assert index.find(queries).tolist() == [2, 0, 3, 1]
    stranger = values[:1].copy()
    stranger[0, 9] = 1
    assert index.find(stranger).tolist() == [-1]


def test_repeats_are_found_on_full_values_not_prefixes() -> None:
    values = np.zeros((5, 32), np.uint8)
    values[1, 31] = 1  # shares the prefix of row 0, differs later
    values[4, 31] = 1  # a true repeat of row 1
    assert repeated_rows(values).tolist() == [2, 3, 4]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.binary(min_size=2, max_size=2), max_size=40), st.lists(st.binary(min_size=2, max_size=2), max_size=10)
)
def test_find_agrees_with_a_dict(stored: list[bytes], queries: list[bytes]) -> None:
    stored = list(dict.fromkeys(stored))  # distinct values

    def widen(items: list[bytes]) -> np.ndarray:  # 2 random bytes at both ends, so prefixes collide often
        rows = [item[:1] + bytes(29) + item[1:] + b"\x00" for item in items]
        return np.frombuffer(b"".join(rows), np.uint8).reshape(-1, 32).copy()

    expected = {v: i for i, v in enumerate(stored)}
    assert PointIndex(widen(stored)).find(widen(queries)).tolist() == [expected.get(q, -1) for q in queries]
