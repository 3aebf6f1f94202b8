"""A party's model inputs read from Parquet batch by batch, instead of held as tensors for every aligned row.

Theory of operation. The training machine reads its rows as ``tensor[idx]`` for each batch's row positions ``idx``
(positions in the aligned order) and asks ``len(tensor)`` once. :class:`ParquetInputs` gives it two objects that
answer both - the categorical codes and the numeric matrix - without a tensor behind them: indexing maps the batch's
aligned positions to the party's own table rows, reads those rows from the Parquet file with
:class:`~vsplit.data.parquet_rows.ParquetRows` (row groups decoded on demand, a bounded LRU cache), and runs the
fitted :class:`~vsplit.data.preprocess.TablePreprocessor` on them. Preprocessing is row by row (category codes,
fitted quantiles or moments), so a batch read this way is bit for bit the batch sliced from the whole transformed
table, and training gives the same model. The last batch is kept, so the two views read it once.

Example:
    >>> import pathlib, tempfile
    >>> import numpy as np, pandas as pd, torch
    >>> from vsplit.data.preprocess import TablePreprocessor
    >>> table = pd.DataFrame({"x": np.arange(6.0), "c": list("abcabc")})
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.parquet"
    >>> table.to_parquet(path, row_group_size=2)
    >>> pre = TablePreprocessor(scaling="standard").fit(table)
    >>> cat, num = ParquetInputs(path, pre, rows=np.array([5, 0, 3]))
    >>> len(num), bool(torch.equal(num[torch.tensor([2, 0])], pre.transform(table)[1][[3, 5]]))
    (3, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from vsplit.data.parquet_rows import ParquetRows
from vsplit.data.stream_fit import to_frame, widened_columns


class ParquetInputs:
    """The ``(cat, num)`` inputs of a party's aligned ``rows``, read from ``path`` per batch.

    Args:
        path: the party's table as a Parquet file or folder, in the row order its IDs were aligned in.
        preprocessor: the fitted preprocessing of the party's feature columns.
        rows: the party's own table rows in the aligned order (what PSI returned).
        cache_groups: row groups of the file kept decoded.
    """

    def __init__(self, path: str | Path, preprocessor: Any, *, rows: np.ndarray, cache_groups: int = 4) -> None:
        self.preprocessor = preprocessor
        self.rows = np.asarray(rows, dtype=np.int64)
        self.source = ParquetRows(path, columns=list(preprocessor.columns_), cache_groups=cache_groups)
        self._dtypes = widened_columns(self.source)  # each batch in the dtypes of the whole table, as fitted
        self._last: tuple[bytes, tuple[torch.Tensor, torch.Tensor]] | None = None

    def __iter__(self):
        return iter((_View(self, 0), _View(self, 1)))

    def __len__(self) -> int:
        return 2

    def batch(self, idx: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``(cat, num)`` tensors of aligned positions ``idx``."""
        positions = np.asarray(idx, dtype=np.int64)
        key = positions.tobytes()
        if self._last is None or self._last[0] != key:
            table = to_frame(self.source.take(self.rows[positions]), self._dtypes)
            self._last = (key, self.preprocessor.transform(table))
        return self._last[1]


class _View:
    """One of the two input tensors, as the training machine sees it: a length and ``view[idx]``."""

    def __init__(self, inputs: ParquetInputs, which: int) -> None:
        self._inputs, self._which = inputs, which

    def __len__(self) -> int:
        return len(self._inputs.rows)

    def __getitem__(self, idx: Any) -> torch.Tensor:
        return self._inputs.batch(idx)[self._which]
