"""Per-party preprocessing, fitted on that party's own training rows only.

Each party turns its own table into two tensors for its bottom model: category codes (``0`` is reserved for
categories not seen in training) and scaled numeric columns. Nothing about one party's columns is ever known to
another party: the fitted state stays with the party that fitted it.

Categorical columns are those of object, string, category or bool dtype unless listed explicitly, but a text column
of mostly numbers is a numeric column with stray strings: refused, or with ``coerce_numbers`` made missing
(:mod:`vsplit.data.column_types`). Numeric scaling is ``"quantile"`` (rank-based map to a normal distribution:
robust to the heavy tails of balances and durations) or ``"standard"``. Missing values (and infinities) raise a
:class:`~vsplit.errors.DataError` naming the column and row unless ``missing="impute"`` (the median for numbers plus
a was-missing indicator column; an ``"<missing>"`` category for categories).

Example:
    >>> import pandas as pd
    >>> df = pd.DataFrame({"job": ["a", "b", "a"], "balance": [1.0, 5.0, 3.0]})
    >>> prep = TablePreprocessor().fit(df)
    >>> cat, num = prep.transform(pd.DataFrame({"job": ["b", "zzz"], "balance": [3.0, 9.0]}))
    >>> cat.tolist()  # "zzz" was never seen: code 0
    [[2], [0]]
    >>> prep.cardinalities, prep.n_numeric
    ([3], 1)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from pandas.api import types as ptypes

from vsplit.data.column_types import mostly_numbers, show, to_numbers
from vsplit.data.quantile import QuantileScaler
from vsplit.errors import ConfigError, DataError

MISSING = "<missing>"


def is_categorical(series: pd.Series) -> bool:
    """True for columns treated as categories by default (strings, categoricals, booleans)."""
    return bool(
        ptypes.is_object_dtype(series)
        or ptypes.is_string_dtype(series)
        or isinstance(series.dtype, pd.CategoricalDtype)
        or ptypes.is_bool_dtype(series)
    )


def raise_if_missing(counts: dict[str, int], *, first: dict[str, str] | None = None) -> None:
    """Raise the :class:`DataError` for missing values under ``missing="error"`` if any column count is above 0;
    ``first`` names the first bad cell of each column (e.g. ``"inf at row 4"``). Infinities count as missing."""
    if bad := {c: n for c, n in counts.items() if n}:
        cells = "; ".join(f"{c!r}: {first[c]}" for c in list(bad)[:3] if first and c in first)
        raise DataError(
            f"missing values (NaN) in columns {bad}{f' (first {cells})' if cells else ''}; infinities count as "
            "missing: clean them, or set missing='impute' (data.missing) to fill numbers with the training median "
            "(plus an indicator column) and categories with a '<missing>' category"
        )


@dataclass
class TablePreprocessor:
    """Fits category codes and numeric scaling on one party's training rows.

    Args:
        categorical: columns to treat as categories; default: detect by dtype.
        scaling: ``"quantile"`` or ``"standard"``.
        missing: ``"error"`` (default) or ``"impute"``.
        seed: seed of the quantile transformer's subsampling.
        coerce_numbers: make the stray text of a numeric column missing values, with a warning (default: refuse).
    """

    categorical: Sequence[str] | None = None
    scaling: str = "quantile"
    missing: str = "error"
    seed: int = 0
    coerce_numbers: bool = False
    columns_: list[str] = field(default_factory=list, init=False)
    #: why each column has its type (reported in report.json "columns")
    rules_: dict[str, str] = field(default_factory=dict, init=False)
    categorical_: list[str] = field(default_factory=list, init=False)
    numeric_: list[str] = field(default_factory=list, init=False)
    categories_: dict[str, dict[str, int]] = field(default_factory=dict, init=False)
    imputed_: dict[str, float] = field(default_factory=dict, init=False)
    _scaler: object | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.scaling not in ("quantile", "standard"):
            raise ConfigError(f"scaling must be 'quantile' or 'standard', got {self.scaling!r}")
        if self.missing not in ("error", "impute"):
            raise ConfigError(f"missing must be 'error' or 'impute', got {self.missing!r}")

    # -- fitting ---------------------------------------------------------------------------------------------------
    def fit(self, table: pd.DataFrame) -> TablePreprocessor:
        """Learn codes and scaling from ``table`` (this party's training rows, feature columns only)."""
        if table.shape[0] == 0:
            raise DataError("cannot fit preprocessing on an empty table; give the party at least one training row")
        self.choose_columns(table)
        table = self._as_numbers(table)
        self._check_missing(table)
        for column in self.categorical_:
            values = self._categorical_values(table[column])
            self.categories_[column] = {v: i + 1 for i, v in enumerate(sorted(set(values)))}
        numeric = self._numeric_matrix(table, fit=True)
        if numeric.shape[1]:
            if self.scaling == "quantile":
                self._scaler = QuantileScaler.fit(numeric, n_quantiles=min(1000, len(table)), seed=self.seed)
            else:
                mean, std = numeric.mean(0), numeric.std(0)
                self._scaler = (mean, np.where(std > 0, std, 1.0))
        return self

    def choose_columns(self, table: pd.DataFrame) -> None:
        """Set ``columns_``, ``categorical_`` and ``numeric_`` from ``table``'s columns and dtypes (no rows needed:
        the streamed fit, :func:`vsplit.data.stream_fit.fit_parquet`, passes an empty frame of the file's dtypes)."""
        self.columns_ = list(table.columns)
        wanted = set(self.categorical) if self.categorical is not None else None
        if wanted is not None and (unknown := wanted - set(self.columns_)):
            raise DataError(f"categorical columns {sorted(unknown)} are not in the table; fix data.categorical "
                            "(categorical= in the estimator)")
        # text columns of mostly numbers (each parsed once): numeric columns with stray strings
        mostly = {c for c in self.columns_ if (wanted is None or c not in wanted) and mostly_numbers(table[c])}
        self.rules_ = {}
        for column in self.columns_:
            if wanted is not None:
                self.rules_[column] = "listed in data.categorical" if column in wanted else "not in data.categorical"
            elif column in mostly:
                self.rules_[column] = "mostly numbers, with stray text"
            else:
                self.rules_[column] = f"{table[column].dtype} dtype"
        self.categorical_ = [
            c for c in self.columns_
            if (c in wanted if wanted is not None else is_categorical(table[c]) and c not in mostly)
        ]
        self.numeric_ = [c for c in self.columns_ if c not in self.categorical_]
        for column in self.numeric_:
            if not ptypes.is_numeric_dtype(table[column]) and column not in mostly:
                raise DataError(
                    f"column {column!r} is neither numeric nor categorical ({table[column].dtype}); convert it"
                )

    # -- transforming ----------------------------------------------------------------------------------------------
    def transform(self, table: pd.DataFrame) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(cat, num)`` tensors for ``table``'s rows."""
        if not self.columns_:
            raise ConfigError("call fit() before transform()")
        if missing := [c for c in self.columns_ if c not in table.columns]:
            raise DataError(f"columns {missing} are missing; the table must have the columns it was fitted on")
        table = self._as_numbers(table)
        self._check_missing(table)
        codes = np.zeros((len(table), len(self.categorical_)), dtype=np.int64)
        for j, column in enumerate(self.categorical_):
            mapping = self.categories_[column]
            codes[:, j] = [mapping.get(v, 0) for v in self._categorical_values(table[column])]
        numeric = self._numeric_matrix(table, fit=False)
        if numeric.shape[1]:
            if self.scaling == "quantile":
                numeric = self._scaler.transform(numeric)  # type: ignore[union-attr]
            else:
                mean, std = self._scaler  # type: ignore[misc]
                numeric = (numeric - mean) / std
        return torch.from_numpy(codes), torch.from_numpy(np.ascontiguousarray(numeric, dtype=np.float32))

    def column_types(self) -> dict[str, dict[str, object]]:
        """Each fitted column's type, the rule that gave it, and its category count or imputed median.

        >>> prep = TablePreprocessor().fit(pd.DataFrame({"job": ["a", "b"], "x": [1.0, 2.0]}))
        >>> types = prep.column_types()
        >>> types["job"]["type"], types["job"]["categories"], types["x"]["type"], types["x"]["rule"]
        ('categorical', 2, 'numeric', 'float64 dtype')
        """
        out: dict[str, dict[str, object]] = {}
        for column in self.columns_:
            kind = "categorical" if column in self.categorical_ else "numeric"
            entry: dict[str, object] = {"type": kind, "rule": self.rules_.get(column, "saved model")}
            if kind == "categorical":
                entry["categories"] = len(self.categories_.get(column, {}))
            elif column in self.imputed_:
                entry["imputed_median"] = self.imputed_[column]
            out[column] = entry
        return out

    @property
    def cardinalities(self) -> list[int]:
        """Number of codes per categorical column, including the unknown code 0."""
        return [len(self.categories_[c]) + 1 for c in self.categorical_]

    @property
    def n_numeric(self) -> int:
        """Width of the numeric tensor (numeric columns plus was-missing indicators)."""
        return len(self.numeric_) + len(self.imputed_)

    # -- saving ----------------------------------------------------------------------------------------------------
    def state(self) -> dict[str, object]:
        """The fitted state as plain lists, dicts and arrays (no pickle): see :meth:`from_state`.

        >>> import pandas as pd
        >>> prep = TablePreprocessor().fit(pd.DataFrame({"job": ["a", "b"], "x": [1.0, 2.0]}))
        >>> again = TablePreprocessor.from_state(prep.state())
        >>> bool((again.transform(pd.DataFrame({"job": ["b"], "x": [1.5]}))[1]
        ...       == prep.transform(pd.DataFrame({"job": ["b"], "x": [1.5]}))[1]).all())
        True
        """
        scaler: dict[str, object] = {}
        if isinstance(self._scaler, QuantileScaler):
            scaler = {"quantiles": self._scaler.quantiles_, "references": self._scaler.references_}
        elif self._scaler is not None:
            scaler = {"mean": self._scaler[0], "std": self._scaler[1]}
        return {
            "scaling": self.scaling,
            "missing": self.missing,
            "seed": self.seed,
            "coerce_numbers": self.coerce_numbers,
            "columns": list(self.columns_),
            "categorical": list(self.categorical_),
            "numeric": list(self.numeric_),
            "categories": {c: list(m) for c, m in self.categories_.items()},
            "imputed": dict(self.imputed_),
            "scaler": scaler,
        }

    @classmethod
    def from_state(cls, state: dict) -> TablePreprocessor:
        """Rebuild a fitted preprocessor from :meth:`state`."""
        prep = cls(categorical=list(state["categorical"]), scaling=state["scaling"], missing=state["missing"],
                   seed=int(state["seed"]), coerce_numbers=bool(state.get("coerce_numbers", False)))
        prep.columns_ = list(state["columns"])
        prep.categorical_ = list(state["categorical"])
        prep.numeric_ = list(state["numeric"])
        prep.categories_ = {c: {v: i + 1 for i, v in enumerate(values)} for c, values in state["categories"].items()}
        prep.imputed_ = {c: float(v) for c, v in state["imputed"].items()}
        scaler = state["scaler"]
        if "quantiles" in scaler:
            prep._scaler = QuantileScaler(scaler["quantiles"], scaler["references"])
        elif "mean" in scaler:
            prep._scaler = (np.asarray(scaler["mean"], dtype=np.float64), np.asarray(scaler["std"], dtype=np.float64))
        prep._check_state()
        return prep

    def _check_state(self) -> None:
        """Raise :class:`ValueError` naming what does not fit in a state read back (damaged on disk, edited)."""
        named = set(self.columns_)
        problems = [
            ("every column named once", len(named) == len(self.columns_) and all(isinstance(c, str) for c in named)),
            ("categorical and numeric columns among the columns", set(self.categorical_) | set(self.numeric_) <= named
             and not set(self.categorical_) & set(self.numeric_)),
            ("categories of every categorical column", set(self.categories_) == set(self.categorical_)),
            ("imputed medians of numeric columns only", set(self.imputed_) <= set(self.numeric_)),
            ("a scaling of quantile or standard", self.scaling in ("quantile", "standard")),
        ]
        width = len(self.numeric_) + len(self.imputed_)
        if isinstance(self._scaler, QuantileScaler):
            q, r = self._scaler.quantiles_, self._scaler.references_
            problems.append(("quantiles of each numeric input", self.scaling == "quantile" and q.ndim == 2
                             and r.ndim == 1 and q.shape == (len(r), width) and len(r) > 0))
        elif self._scaler is not None:
            mean, std = self._scaler
            problems.append(("a mean and std of each numeric input", self.scaling == "standard"
                             and mean.shape == std.shape == (width,)))
        else:
            problems.append(("a fitted scaler", width == 0))
        if wrong := [what for what, ok in problems if not ok]:
            raise ValueError(f"the saved preprocessing does not hold {', '.join(wrong)}")

    # -- helpers ---------------------------------------------------------------------------------------------------
    def _as_numbers(self, table: pd.DataFrame) -> pd.DataFrame:
        """``table`` with each numeric column held as text parsed to numbers (stray text refused or coerced)."""
        texts = [c for c in self.numeric_ if c in table.columns and not ptypes.is_numeric_dtype(table[c])]
        if not texts:
            return table
        table = table.copy()
        for column in texts:
            table[column] = to_numbers(table[column], coerce=self.coerce_numbers)
        return table

    def _check_missing(self, table: pd.DataFrame) -> None:
        if self.missing == "impute":
            return
        holes = table[self.columns_].isna()
        for column in self.numeric_:  # infinities count as missing values
            values = table[column].to_numpy(dtype=np.float64, na_value=np.nan)
            holes[column] = holes[column].to_numpy() | np.isinf(values)
        counts = holes.sum()
        first = {}
        for column, n in counts.items():
            if n:
                row = int(np.flatnonzero(holes[column].to_numpy())[0])
                first[column] = f"{show(table[column].iloc[row])} at row {row + 1}"
        raise_if_missing({c: int(n) for c, n in counts.items() if n}, first=first)

    def _categorical_values(self, series: pd.Series) -> list[str]:
        filled = series.astype(object).where(series.notna(), MISSING)
        return [str(v) for v in filled]

    def _numeric_matrix(self, table: pd.DataFrame, *, fit: bool) -> np.ndarray:
        if not self.numeric_:
            return np.zeros((len(table), 0))
        matrix = table[self.numeric_].to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
        matrix[np.isinf(matrix)] = np.nan  # an infinity is a missing value (refused before, unless imputed)
        if self.missing != "impute":
            return matrix
        if fit:
            medians = np.nanmedian(matrix, axis=0) if len(matrix) else np.zeros(matrix.shape[1])
            self.imputed_ = {
                c: float(0.0 if np.isnan(m) else m)
                for c, m, has in zip(self.numeric_, medians, np.isnan(matrix).any(0), strict=True)
                if has
            }
        flags = []
        for j, column in enumerate(self.numeric_):
            if column in self.imputed_:
                holes = np.isnan(matrix[:, j])
                flags.append(holes.astype(np.float64))
                matrix[holes, j] = self.imputed_[column]
        matrix = np.nan_to_num(matrix, nan=0.0)
        return np.column_stack([matrix, *flags]) if flags else matrix
