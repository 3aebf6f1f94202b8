"""Gradient-boosting baselines on the pooled columns: what a bank's validator compares a split model with.

Both train on the pooled columns of the customers every party knows among the training rows (the rows split
training aligns) and score the same shared test rows as :func:`vsplit.evaluation.compare`. ``hgb`` is
scikit-learn's HistGradientBoosting with its defaults; ``lightgbm`` (``pip install 'vsplit[bench]'``) is tuned by a
small grid on an inner, stratified validation split of the training rows only, with early stopping there, then refit
on all the training rows with the chosen number of trees. The test rows are never seen before scoring.

Example:
    >>> import pandas as pd
    >>> a = pd.DataFrame({"id": ["1", "2", "3"], "x": [1, 2, 3], "y": ["no", "yes", "no"]})
    >>> b = pd.DataFrame({"id": ["3", "1"], "z": ["u", "v"]})
    >>> X, y = pooled({"bank": a, "shop": b}, label_party="bank", label="y", id_column="id", positive_label="yes")
    >>> list(X.columns), y.tolist()
    (['x', 'z'], [0, 0])
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from vsplit.models.seeds import derive_seed

BOOSTERS = ("hgb", "lightgbm")
#: the LightGBM grid searched on the inner validation split (learning rate 0.05, early stopping at 100 rounds)
LIGHTGBM_GRID = {"num_leaves": (15, 31, 63), "min_child_samples": (20, 50), "colsample_bytree": (0.6, 1.0)}


def pooled(views: Mapping[str, pd.DataFrame], *, label_party: str, label: str, id_column: str,
           positive_label: Any) -> tuple[pd.DataFrame, np.ndarray]:
    """The pooled columns of the customers every party knows (label party's order) and the 0/1 labels."""
    table = views[label_party].copy()
    table[id_column] = table[id_column].astype(str)
    for name, other in views.items():
        if name != label_party:
            other = other.copy()
            other[id_column] = other[id_column].astype(str)
            table = table.merge(other, on=id_column, how="inner", sort=False)
    y = (table[label] == positive_label).to_numpy().astype(np.int64)
    X = table.drop(columns=[id_column, label])
    for column in X.columns:
        if not pd.api.types.is_numeric_dtype(X[column]):
            X[column] = X[column].astype("category")
    return X, y


def _aligned_categories(train: pd.DataFrame, test: pd.DataFrame) -> pd.DataFrame:
    test = test.copy()
    for column in train.columns:
        if isinstance(train[column].dtype, pd.CategoricalDtype):
            test[column] = pd.Categorical(test[column].astype(str), categories=train[column].cat.categories)
    return test


def fit_booster(kind: str, X: pd.DataFrame, y: np.ndarray, *, seed: int) -> Any:
    """A fitted booster ``kind`` (``"hgb"`` or ``"lightgbm"``) on ``X``, ``y`` (training rows only)."""
    if kind == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier

        return HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=seed).fit(X, y)
    if kind == "lightgbm":
        return _tuned_lightgbm(X, y, seed=seed)
    raise ValueError(f"unknown booster {kind!r}; choose one of: {', '.join(BOOSTERS)}")


def _tuned_lightgbm(X: pd.DataFrame, y: np.ndarray, *, seed: int) -> Any:
    import lightgbm
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import train_test_split

    inner, valid = train_test_split(np.arange(len(y)), test_size=0.2, stratify=y,
                                    random_state=derive_seed(seed, "lightgbm", "inner") % 2**31)
    best: tuple[float, dict[str, Any], int] | None = None
    for values in itertools.product(*LIGHTGBM_GRID.values()):
        params = dict(zip(LIGHTGBM_GRID, values, strict=True))
        model = lightgbm.LGBMClassifier(n_estimators=2000, learning_rate=0.05, random_state=seed, verbose=-1,
                                        n_jobs=1, **params)
        model.fit(X.iloc[inner], y[inner], eval_X=X.iloc[valid], eval_y=y[valid], eval_metric="auc",
                  callbacks=[lightgbm.early_stopping(100, verbose=False)])
        auc = roc_auc_score(y[valid], model.predict_proba(X.iloc[valid])[:, 1])
        if best is None or auc > best[0]:
            best = (auc, params, max(1, model.best_iteration_ or 1))
    assert best is not None
    _, params, trees = best
    refit_trees = round(trees / 0.8)  # refit on all the training rows: 1/0.8 the rows, 1/0.8 the trees
    model = lightgbm.LGBMClassifier(n_estimators=refit_trees, learning_rate=0.05, random_state=seed, verbose=-1,
                                    n_jobs=1, **params).fit(X, y)
    model.vsplit_params_ = {**params, "n_estimators": refit_trees, "inner_val_auc": round(best[0], 4)}
    return model


def score_boosters(train: Mapping[str, pd.DataFrame], test: Mapping[str, pd.DataFrame], *, label_party: str,
                   label: str, id_column: str, positive_label: Any, seed: int,
                   kinds: tuple[str, ...] = BOOSTERS) -> dict[str, dict[str, Any]]:
    """Each booster of ``kinds`` trained on the pooled ``train`` rows and scored on the pooled ``test`` rows."""
    import time

    from vsplit.metrics import binary_metrics

    keys = {"label_party": label_party, "label": label, "id_column": id_column, "positive_label": positive_label}
    X, y = pooled(train, **keys)
    X_test, y_test = pooled(test, **keys)
    X_test = _aligned_categories(X, X_test[X.columns])
    out = {}
    for kind in kinds:
        started = time.perf_counter()
        model = fit_booster(kind, X, y, seed=seed)
        metrics = binary_metrics(y_test, model.predict_proba(X_test)[:, 1])
        metrics["n_scored"] = len(y_test)
        metrics["seconds"] = round(time.perf_counter() - started, 2)
        if hasattr(model, "vsplit_params_"):
            metrics["params"] = model.vsplit_params_
        out[kind] = metrics
    return out
