"""Fine classes: each party bins its own attributes on its own rows; the edges and categories never leave it.

A numeric attribute gets at most ``max_bins`` quantile bins (code ``k`` holds ``edges[k-1] < x <= edges[k]``; a column
with fewer distinct values than that gets one bin per value); a categorical one gets one bin per category. A missing
value has a bin of its own, always the last code. Bins under ``min_bin_rows`` rows are merged into a neighbour (numeric)
or pooled into one "other" bin (categories); a non-empty missing bin that small cannot be merged and is refused, as is
an attribute with a single value (nothing to bin). A category never seen here gets code ``-1`` (no bin).

Example:
    >>> import pandas as pd
    >>> table = pd.DataFrame({"age": [20.0, 30.0, 40.0, 50.0, None], "job": ["a", "b", "a", "b", "a"]})
    >>> bins = fit_fine_bins(table, categorical=("job",), max_bins=2)
    >>> [b.n_bins for b in bins], bins[0].codes(table["age"]).tolist(), bins[1].label(1)
    ([3, 3], [0, 0, 1, 1, 2], "{'b'}")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from vsplit.errors import ConfigError, DataError

NUMERIC, CATEGORY = "numeric", "category"


@dataclass(frozen=True)
class FineBins:
    """One attribute's fine classes, private to its owner.

    ``edges``: a numeric attribute's upper bin edges but the last (``n_bins - 2`` of them); ``categories``: a
    categorical one's categories and ``category_bin`` the bin of each (rare ones share a bin). The last code,
    ``n_bins - 1``, is the missing bin.
    """

    name: str
    kind: str
    edges: np.ndarray
    categories: tuple[str, ...] = ()
    category_bin: tuple[int, ...] = ()

    @property
    def n_bins(self) -> int:
        """Fine bins: the value bins and the missing bin."""
        values = len(self.edges) + 1 if self.kind == NUMERIC else max(self.category_bin, default=-1) + 1
        return values + 1

    def codes(self, values: pd.Series | np.ndarray) -> np.ndarray:
        """int32 fine-bin code per value (``n_bins - 1``: missing; ``-1``: a category never seen when fitting).

        Raises:
            DataError: a numeric attribute holds text.
        """
        series = pd.Series(np.asarray(values, dtype=object) if not isinstance(values, pd.Series) else values)
        missing = series.isna().to_numpy()
        if self.kind == NUMERIC:
            x = _numbers(series, self.name)
            code = np.searchsorted(self.edges, np.where(missing, 0.0, x), side="left")
        else:
            index = dict(zip(self.categories, self.category_bin, strict=True))
            code = np.array([index.get(str(v), -1) for v in series], dtype=np.int64)
        return np.where(missing, self.n_bins - 1, code).astype(np.int32)

    def label(self, code: int) -> str:
        """A fine bin as a person reads it: ``(-inf, 3.5]``, ``{'a', 'b'}``, ``missing``."""
        if code == self.n_bins - 1:
            return "missing"
        if self.kind == CATEGORY:
            return "{" + ", ".join(repr(c) for c, b in zip(self.categories, self.category_bin, strict=True)
                                   if b == code) + "}"
        low = "-inf" if code == 0 else f"{self.edges[code - 1]:.6g}"
        high = "inf" if code == len(self.edges) else f"{self.edges[code]:.6g}"
        return f"({low}, {high}]"


def _numbers(series: pd.Series, name: str) -> np.ndarray:
    try:
        return pd.to_numeric(series, errors="raise").to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"woe: attribute {name!r} holds text; list it in data.categorical") from None


def fit_fine_bins(table: pd.DataFrame, *, categorical: Sequence[str] = (), max_bins: int = 20, min_bin_rows: int = 1,
                  party: str = "") -> list[FineBins]:
    """Fine classes of every column of ``table`` (a party's own attributes, its aligned rows), in column order.

    Columns named in ``categorical`` or holding text are categorical. ``min_bin_rows``: no bin with fewer rows.

    Raises:
        ConfigError: ``max_bins`` outside 2..255 or ``min_bin_rows`` below 1.
        DataError: an attribute with a single value, a missing bin under ``min_bin_rows`` rows, an infinite value;
            the message names the attribute and ``party``.
    """
    if not 2 <= max_bins <= 255:
        raise ConfigError(f"woe.fine_bins = {max_bins}; use 2..255 (20 is usual)")
    if min_bin_rows < 1:
        raise ConfigError(f"woe.min_bin_rows = {min_bin_rows}; use 1 or more")
    named = set(categorical)
    out = []
    for column in table.columns:  # a loop over attributes
        series, name = table[column], str(column)
        who = f"attribute {name!r}" + (f" of party {party!r}" if party else "")
        if name in named or not (pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series)):
            bins = _fit_categories(series, name, max_bins=max_bins, min_bin_rows=min_bin_rows)
        else:
            bins = _fit_numeric(_numbers(series, name), name, who, max_bins=max_bins, min_bin_rows=min_bin_rows)
        codes = bins.codes(series)
        sizes = np.bincount(codes, minlength=bins.n_bins)
        if int((sizes > 0).sum()) < 2:
            raise DataError(f"woe: {who} has a single value on the aligned rows; remove it from data.features")
        if 0 < sizes[-1] < min_bin_rows:
            raise DataError(f"woe: {who} has {int(sizes[-1])} missing values, fewer than woe.min_bin_rows = "
                            f"{min_bin_rows} (a bin that small tells about its rows); fill them or lower "
                            "woe.min_bin_rows")
        out.append(bins)
    return out


def _fit_numeric(x: np.ndarray, name: str, who: str, *, max_bins: int, min_bin_rows: int) -> FineBins:
    if np.isinf(x).any():
        raise DataError(f"woe: {who} holds an infinite value; clip it or make it missing")
    x = np.sort(x[~np.isnan(x)])
    distinct = np.unique(x)
    if len(distinct) <= max_bins:
        edges = distinct[:-1]
    else:
        edges = np.unique(np.quantile(x, np.arange(1, max_bins) / max_bins))
        edges = edges[edges < distinct[-1]]
    sizes = np.diff(np.searchsorted(x, edges, side="right"), prepend=0, append=len(x)).tolist()
    edges = edges.tolist()
    while edges and min(sizes) < min_bin_rows:  # merge the smallest bin into its smaller neighbour
        k = int(np.argmin(sizes))
        right = k == 0 or (k < len(sizes) - 1 and sizes[k + 1] < sizes[k - 1])
        drop = k if right else k - 1  # the edge between the two bins
        sizes[drop : drop + 2] = [sizes[drop] + sizes[drop + 1]]
        del edges[drop]
    return FineBins(name=name, kind=NUMERIC, edges=np.asarray(edges, dtype=np.float64))


def _fit_categories(series: pd.Series, name: str, *, max_bins: int, min_bin_rows: int) -> FineBins:
    counts = series.dropna().astype(str).value_counts()
    values = sorted(counts.index)
    kept = [v for v in sorted(values, key=lambda v: (-counts[v], v)) if counts[v] >= min_bin_rows][: max_bins - 1]
    kept = sorted(kept)
    rest = [v for v in values if v not in kept]
    if rest and kept and int(counts[rest].sum()) < min_bin_rows:  # the "other" bin joins the smallest category
        kept.remove(min(kept, key=lambda v: (counts[v], v)))
        rest = [v for v in values if v not in kept]
    index = {v: k for k, v in enumerate(kept)}
    bins = tuple(index.get(v, len(kept)) for v in values)
    return FineBins(name=name, kind=CATEGORY, edges=np.empty(0), categories=tuple(values), category_bin=bins)
