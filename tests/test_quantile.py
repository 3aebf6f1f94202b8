"""vsplit.data.quantile is scikit-learn's QuantileTransformer, bit for bit, without importing scikit-learn."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from sklearn.preprocessing import QuantileTransformer
from sklearn.preprocessing._data import BOUNDS_THRESHOLD
from sklearn.utils import check_random_state, resample

from vsplit.data.quantile import BOUNDS_THRESHOLD as OURS
from vsplit.data.quantile import SUBSAMPLE, QuantileArithmetic, QuantileScaler, subsample_rows


def _sklearn(x: np.ndarray, n_quantiles: int, seed: int, output: str = "normal") -> QuantileTransformer:
    return QuantileTransformer(n_quantiles=n_quantiles, output_distribution=output, random_state=seed).fit(x)


def test_constants_are_scikit_learns():
    assert OURS == BOUNDS_THRESHOLD and SUBSAMPLE == QuantileTransformer().subsample


@pytest.mark.parametrize("n", [3, 999, 12_345])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fit_and_transform_equal_scikit_learn_bit_for_bit(n, dtype):
    rng = np.random.default_rng(n)
    x = np.column_stack([rng.lognormal(size=n), rng.integers(0, 5, size=n), rng.normal(size=n)]).astype(dtype)
    x[rng.random(n) < 0.05, 0] = np.nan  # NaN is ignored by the fit and stays NaN
    theirs, ours = _sklearn(x, min(1000, n), seed=7), QuantileScaler.fit(x, n_quantiles=min(1000, n), seed=7)
    np.testing.assert_array_equal(ours.quantiles_, theirs.quantiles_)
    np.testing.assert_array_equal(ours.references_, theirs.references_)
    new = np.vstack([x[:50].astype(np.float64), [[-1e9, -3.0, 1e9], [1e9, 99.0, -1e9]]])  # beyond the range too
    np.testing.assert_array_equal(ours.transform(new), theirs.transform(new))


def test_the_subsample_is_the_rows_scikit_learn_draws():
    for n, seed in ((10_001, 0), (25_000, 3)):
        expected = resample(np.arange(n), replace=False, n_samples=SUBSAMPLE, random_state=check_random_state(seed))
        np.testing.assert_array_equal(subsample_rows(n, seed), expected)
    assert subsample_rows(SUBSAMPLE, 0) is None


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=40),
                  elements=st.floats(-1e6, 1e6) | st.just(float("nan"))),
       st.sampled_from(["normal", "uniform"]))
def test_the_arithmetic_equals_scikit_learns_transform_on_any_table(x, output):
    fitted = x.copy()
    fitted[np.isnan(fitted).all(1)] = 0.0  # a row of NaN only is fine, a column of NaN only is not fittable
    if np.isnan(fitted).all(0).any():
        fitted = np.nan_to_num(fitted)
    theirs = _sklearn(fitted, min(1000, len(fitted)), seed=0, output=output)
    np.testing.assert_array_equal(QuantileArithmetic(theirs)(x), theirs.transform(x))


def test_a_party_process_imports_no_scikit_learn_or_scipy_statistics():
    """A partner's process starts without scikit-learn (about a second of CPU at every start)."""
    code = ("import sys, vsplit.node, vsplit.cli.run, vsplit.data.preprocess, vsplit.data.stream_fit; "
            "print(sorted({m.split('.')[0] + '.' + m.split('.')[1] if '.' in m else m for m in sys.modules "
            "if m.startswith(('sklearn', 'scipy.stats'))}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
