"""Gradient-boosting baselines on the pooled columns: what a bank's validator compares a split model with.

Each trains on the pooled columns of the customers every party knows among the training rows (the rows split
training aligns) and scores the same shared test rows as :func:`vsplit.evaluation.compare`. ``hgb`` is
scikit-learn's HistGradientBoosting with its defaults. The others (``pip install 'vsplit[bench]'``) choose on an
inner, stratified validation split of the training rows only (20 %), with early stopping there, then refit on all the
training rows with the chosen number of trees (scaled by ``1 / 0.8``, the rows' ratio): ``catboost`` with CatBoost's
defaults (its learning rate, chosen by CatBoost for the first fit, kept for the refit), ``lightgbm`` and ``xgboost``
each tuned by an Optuna search (:data:`TRIALS` trials, TPE sampler seeded) over the learning rate, leaves or depth,
minimum child size, column and row sampling and L2 (:data:`LIGHTGBM_SPACE`, :data:`XGBOOST_SPACE`). Every booster
computes with one thread and takes ``seed``. The test rows are never seen before scoring.

Example:
    >>> import pandas as pd
    >>> a = pd.DataFrame({"id": ["1", "2", "3"], "x": [1, 2, 3], "y": ["no", "yes", "no"]})
    >>> b = pd.DataFrame({"id": ["3", "1"], "z": ["u", "v"]})
    >>> X, y = pooled({"bank": a, "shop": b}, label_party="bank", label="y", id_column="id", positive_label="yes")
    >>> list(X.columns), y.tolist()
    (['x', 'z'], [0, 0])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from vsplit.models.seeds import derive_seed

BOOSTERS = ("hgb", "lightgbm", "xgboost", "catboost")
#: Optuna trials of the ``lightgbm`` and ``xgboost`` searches
TRIALS = 40
#: trees at most in a trial, and the early-stopping rounds on the inner validation split
MAX_TREES, STOP_ROUNDS = 1000, 50
#: the LightGBM search space: (low, high, log scale) of each parameter (``subsample``: row bagging every tree)
LIGHTGBM_SPACE = {"learning_rate": (0.02, 0.3, True), "num_leaves": (4, 128, True),
                  "min_child_samples": (5, 200, True), "colsample_bytree": (0.3, 1.0, False),
                  "subsample": (0.5, 1.0, False), "reg_lambda": (1e-3, 30.0, True)}
#: the XGBoost search space, as :data:`LIGHTGBM_SPACE` (``max_depth`` for leaves, ``min_child_weight`` for size)
XGBOOST_SPACE = {"learning_rate": (0.02, 0.3, True), "max_depth": (2, 10, False),
                 "min_child_weight": (0.5, 50.0, True), "colsample_bytree": (0.3, 1.0, False),
                 "subsample": (0.5, 1.0, False), "reg_lambda": (1e-3, 30.0, True)}
#: the inner validation share of the training rows
INNER = 0.2


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


def fit_booster(kind: str, X: pd.DataFrame, y: np.ndarray, *, seed: int, trials: int = TRIALS) -> Any:
    """A fitted booster ``kind`` (one of :data:`BOOSTERS`) on ``X``, ``y`` (training rows only); ``trials``: of the
    Optuna searches (``lightgbm``, ``xgboost``)."""
    if kind == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier

        return HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=seed).fit(X, y)
    if kind == "catboost":
        return fit_catboost(X, y, seed=seed)
    fits = {"lightgbm": fit_lightgbm, "xgboost": fit_xgboost}
    if kind not in fits:
        raise ValueError(f"unknown booster {kind!r}; choose one of: {', '.join(BOOSTERS)}")
    return fits[kind](X, y, seed=seed, trials=trials)


def inner_split(y: np.ndarray, *, seed: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the inner training rows and of the inner validation rows (stratified, ``INNER`` of them)."""
    from sklearn.model_selection import train_test_split

    inner, valid = train_test_split(np.arange(len(y)), test_size=INNER, stratify=y,
                                    random_state=derive_seed(seed, kind, "inner") % 2**31)
    return inner, valid


def _search(objective: Any, space: Mapping[str, tuple[float, float, bool]], *, seed: int, trials: int
            ) -> tuple[float, dict[str, Any], int]:
    """Optuna's TPE search of ``space``: the best (validation AUC, parameters, trees) that ``objective`` returned."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    found: dict[int, int] = {}

    def run(trial: Any) -> float:
        params = {name: (trial.suggest_int(name, int(lo), int(hi), log=log) if isinstance(lo, int)
                         else trial.suggest_float(name, lo, hi, log=log)) for name, (lo, hi, log) in space.items()}
        auc, trees = objective(params)
        found[trial.number] = trees
        return auc

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed % 2**31))
    study.optimize(run, n_trials=trials)
    return float(study.best_value), dict(study.best_params), found[study.best_trial.number]


def _refit_trees(trees: int) -> int:
    """Trees for the refit on all the training rows: ``1 / (1 - INNER)`` the rows, as many more trees."""
    return max(1, round(trees / (1 - INNER)))


def fit_lightgbm(X: pd.DataFrame, y: np.ndarray, *, seed: int, trials: int = TRIALS) -> Any:
    """LightGBM tuned by :data:`TRIALS` Optuna trials on the inner split, refit on every row of ``X``."""
    import lightgbm
    from sklearn.metrics import roc_auc_score

    inner, valid = inner_split(y, seed=seed, kind="lightgbm")
    fixed = {"random_state": seed, "verbose": -1, "n_jobs": 1, "subsample_freq": 1}

    def objective(params: dict[str, Any]) -> tuple[float, int]:
        model = lightgbm.LGBMClassifier(n_estimators=MAX_TREES, **fixed, **params)
        model.fit(X.iloc[inner], y[inner], eval_X=X.iloc[valid], eval_y=y[valid], eval_metric="auc",
                  callbacks=[lightgbm.early_stopping(STOP_ROUNDS, verbose=False)])
        return roc_auc_score(y[valid], model.predict_proba(X.iloc[valid])[:, 1]), max(1, model.best_iteration_ or 1)

    auc, params, trees = _search(objective, LIGHTGBM_SPACE, seed=derive_seed(seed, "lightgbm", "optuna"),
                                 trials=trials)
    model = lightgbm.LGBMClassifier(n_estimators=_refit_trees(trees), **fixed, **params).fit(X, y)
    model.vsplit_params_ = {**_rounded(params), "n_estimators": _refit_trees(trees), "inner_val_auc": round(auc, 4),
                            "trials": trials}
    return model


def fit_xgboost(X: pd.DataFrame, y: np.ndarray, *, seed: int, trials: int = TRIALS) -> Any:
    """XGBoost (histograms, native categories) tuned as :func:`fit_lightgbm`, refit on every row of ``X``."""
    import xgboost
    from sklearn.metrics import roc_auc_score

    X = _xgboost_table(X)
    inner, valid = inner_split(y, seed=seed, kind="xgboost")
    fixed = {"random_state": seed % 2**31, "n_jobs": 1, "tree_method": "hist", "enable_categorical": True}

    def objective(params: dict[str, Any]) -> tuple[float, int]:
        model = xgboost.XGBClassifier(n_estimators=MAX_TREES, early_stopping_rounds=STOP_ROUNDS, eval_metric="auc",
                                      **fixed, **params)
        model.fit(X.iloc[inner], y[inner], eval_set=[(X.iloc[valid], y[valid])], verbose=False)
        return roc_auc_score(y[valid], model.predict_proba(X.iloc[valid])[:, 1]), int(model.best_iteration) + 1

    auc, params, trees = _search(objective, XGBOOST_SPACE, seed=derive_seed(seed, "xgboost", "optuna"),
                                 trials=trials)
    model = xgboost.XGBClassifier(n_estimators=_refit_trees(trees), **fixed, **params).fit(X, y)
    model.vsplit_params_ = {**_rounded(params), "n_estimators": _refit_trees(trees), "inner_val_auc": round(auc, 4),
                            "trials": trials}
    model.vsplit_table_ = _xgboost_table
    return model


def fit_catboost(X: pd.DataFrame, y: np.ndarray, *, seed: int) -> Any:
    """CatBoost with its defaults, early-stopped on the inner split, refit on every row of ``X`` with the chosen
    iterations (scaled as :func:`fit_lightgbm`'s trees) and the first fit's learning rate."""
    import catboost
    from sklearn.metrics import roc_auc_score

    X = _catboost_table(X)
    cats = [c for c in X.columns if X[c].dtype == object]
    inner, valid = inner_split(y, seed=seed, kind="catboost")
    fixed = {"random_seed": seed % 2**31, "thread_count": 1, "verbose": False, "cat_features": cats,
             "allow_writing_files": False}
    first = catboost.CatBoostClassifier(eval_metric="AUC", early_stopping_rounds=STOP_ROUNDS * 2, **fixed)
    first.fit(X.iloc[inner], y[inner], eval_set=(X.iloc[valid], y[valid]), use_best_model=True)
    auc = roc_auc_score(y[valid], first.predict_proba(X.iloc[valid])[:, 1])
    trees, rate = _refit_trees(int(first.get_best_iteration()) + 1), float(first.learning_rate_)
    model = catboost.CatBoostClassifier(iterations=trees, learning_rate=rate, **fixed).fit(X, y)
    model.vsplit_params_ = {"iterations": trees, "learning_rate": round(rate, 5), "inner_val_auc": round(auc, 4)}
    model.vsplit_table_ = _catboost_table
    return model


def _catboost_table(X: pd.DataFrame) -> pd.DataFrame:
    """CatBoost's input: category columns as text (missing: ``"nan"``)."""
    X = X.copy()
    for column in X.columns:
        if isinstance(X[column].dtype, pd.CategoricalDtype):
            X[column] = X[column].astype(str).astype(object)
    return X


def _xgboost_table(X: pd.DataFrame) -> pd.DataFrame:
    """XGBoost's input: each category column's categories renamed 0, 1, ... (XGBoost 3.1 reads no pandas-3 text
    categories; a table whose categories were aligned to the training table's gets the same numbers)."""
    X = X.copy()
    for column in X.columns:
        if isinstance(X[column].dtype, pd.CategoricalDtype):
            X[column] = X[column].cat.rename_categories(range(len(X[column].cat.categories)))
    return X


def _rounded(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: round(v, 5) if isinstance(v, float) else v for k, v in params.items()}


def score_boosters(train: Mapping[str, pd.DataFrame], test: Mapping[str, pd.DataFrame], *, label_party: str,
                   label: str, id_column: str, positive_label: Any, seed: int,
                   kinds: tuple[str, ...] = BOOSTERS, trials: int = TRIALS) -> dict[str, dict[str, Any]]:
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
        model = fit_booster(kind, X, y, seed=seed, trials=trials)
        table = model.vsplit_table_(X_test) if hasattr(model, "vsplit_table_") else X_test
        metrics = binary_metrics(y_test, model.predict_proba(table)[:, 1])
        metrics["n_scored"] = len(y_test)
        metrics["seconds"] = round(time.perf_counter() - started, 2)
        if hasattr(model, "vsplit_params_"):
            metrics["params"] = model.vsplit_params_
        out[kind] = metrics
    return out
