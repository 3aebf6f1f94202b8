"""The scikit-learn base of every estimator that takes ``{party: DataFrame}`` views instead of a 2-D array.

Example:
    >>> class Probe(ViewsEstimator):
    ...     allows_nan = True
    >>> tags = Probe().__sklearn_tags__().input_tags
    >>> tags.two_d_array, tags.dict, tags.allow_nan
    (False, True, True)
"""

from __future__ import annotations

from typing import Any, ClassVar

from sklearn.base import BaseEstimator


class ViewsEstimator(BaseEstimator):
    """Tells scikit-learn that ``X`` is a mapping of party names to tables (categorical and string columns allowed);
    ``allows_nan``: whether missing values are accepted as they are (the trees and the scorecard bin them)."""

    allows_nan: ClassVar[bool] = False

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # X is {party: DataFrame}, not a 2-D array
        tags.input_tags.dict = True
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        if self.allows_nan:
            tags.input_tags.allow_nan = True
        return tags
