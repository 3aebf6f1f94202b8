"""Gradient-boosted trees on one party's prepared inputs: the bank's own booster (LightGBM, the ``bench`` extra).

Theory of operation. A party's preprocessing turns its table into category codes (0: a value not seen in training)
and scaled numbers (:class:`~vsplit.data.preprocess.TablePreprocessor`). :meth:`BoosterModel.fit` trains LightGBM's
binary booster on them, the codes as categorical features, with fixed, conservative settings (:data:`PARAMS`: small
leaves, a slow learning rate, row and column sampling) and a seed, on one thread and deterministic, so the same rows
and seed give the same trees. The model keeps LightGBM's own text format, read back by :meth:`from_state` with
LightGBM's parser (no pickle, nothing executed). Its reasons are TreeSHAP's per-column contributions in log-odds
(:meth:`contributions`: LightGBM's ``pred_contrib``), which sum to the row's log-odds minus the expected value
(:meth:`baseline_log_odds`). Without LightGBM, :func:`available` is False and the bank's fallback compares its network
and its regression only (:mod:`vsplit.app.fallback`).

Example:
    >>> import numpy as np, torch
    >>> rng = np.random.default_rng(0)
    >>> num = torch.tensor(rng.normal(size=(400, 2)), dtype=torch.float32)
    >>> cat = torch.tensor(rng.integers(1, 3, size=(400, 1)))
    >>> y = (num[:, 0].numpy() + 0.5 * (cat[:, 0].numpy() == 2) > 0.3).astype(int)
    >>> model = BoosterModel.fit((cat, num), y, cardinalities=[3], seed=0)
    >>> p = model.proba((cat, num))
    >>> p.shape, bool(np.mean((p > 0.5) == y) > 0.8)
    ((400,), True)
    >>> c, base = model.contributions((cat[:3], num[:3])), model.baseline_log_odds((cat[:3], num[:3]))
    >>> bool(np.allclose(c.sum(axis=1) + base, model.log_odds((cat[:3], num[:3]))))
    True
    >>> again = BoosterModel.from_state(model.state())
    >>> bool(np.array_equal(again.proba((cat, num)), p))
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: the name reports and ``fallback.npz`` give this model
NAME = "boosted_trees"
#: LightGBM's settings: conservative on a few thousand rows (the fallback compares it over folds before using it)
PARAMS = {"objective": "binary", "learning_rate": 0.05, "num_leaves": 15, "min_child_samples": 20,
          "subsample": 0.8, "subsample_freq": 1, "colsample_bytree": 0.8, "reg_lambda": 1.0, "n_estimators": 200,
          "num_threads": 1, "deterministic": True, "force_row_wise": True, "verbose": -1}


def available() -> bool:
    """Whether LightGBM (the ``bench`` extra) is installed."""
    import importlib.util

    return importlib.util.find_spec("lightgbm") is not None


def _design(inputs: Sequence[Any]) -> np.ndarray:
    """The category codes, then the numbers, as one float matrix (LightGBM reads a code column as categorical)."""
    cat, num = inputs
    cat = np.asarray(cat.numpy() if hasattr(cat, "numpy") else cat, dtype=np.float64).reshape(len(cat), -1)
    num = np.asarray(num.numpy() if hasattr(num, "numpy") else num, dtype=np.float64).reshape(len(num), -1)
    return np.hstack([cat, num])


@dataclass
class BoosterModel:
    """A fitted LightGBM booster over ``(category codes, numbers)`` inputs, kept in LightGBM's text format."""

    text: str
    categorical: int  # how many leading columns are category codes
    booster: Any = None

    @classmethod
    def fit(cls, inputs: Sequence[Any], y: np.ndarray, *, cardinalities: Sequence[int], seed: int) -> BoosterModel:
        """Train on ``inputs`` and their 0/1 labels ``y`` (same rows), seeded by ``seed``."""
        import lightgbm as lgb

        design = _design(inputs)
        categorical = len(list(cardinalities))
        params = {**PARAMS, "seed": int(seed) % 2**31}
        rounds = int(params.pop("n_estimators"))
        data = lgb.Dataset(design, label=np.asarray(y, dtype=np.float64),
                           categorical_feature=list(range(categorical)) or "auto", free_raw_data=False)
        booster = lgb.train(params, data, num_boost_round=rounds)
        return cls(text=booster.model_to_string(), categorical=categorical, booster=booster)

    def _booster(self) -> Any:
        if self.booster is None:
            import lightgbm as lgb

            self.booster = lgb.Booster(model_str=self.text)
        return self.booster

    def log_odds(self, inputs: Sequence[Any]) -> np.ndarray:
        """Each row's log-odds of the event."""
        return np.asarray(self._booster().predict(_design(inputs), raw_score=True), dtype=np.float64)

    def proba(self, inputs: Sequence[Any]) -> np.ndarray:
        """Each row's probability of the event."""
        return 1 / (1 + np.exp(-self.log_odds(inputs)))

    def attributions(self, inputs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """One TreeSHAP pass (LightGBM's ``pred_contrib``): each input column's share of each row's log-odds,
        ``(rows, categorical + numeric columns)``, and the expected log-odds they start from, per row; together they
        sum to the row's log-odds."""
        values = np.asarray(self._booster().predict(_design(inputs), pred_contrib=True), dtype=np.float64)
        return values[:, :-1], values[:, -1]

    def contributions(self, inputs: Sequence[Any]) -> np.ndarray:
        """Each input column's share of each row's log-odds (:meth:`attributions`)."""
        return self.attributions(inputs)[0]

    def baseline_log_odds(self, inputs: Sequence[Any]) -> np.ndarray:
        """The expected log-odds the contributions start from, per row (:meth:`attributions`)."""
        return self.attributions(inputs)[1]

    def state(self) -> dict[str, Any]:
        """Plain text and numbers (no pickle): :meth:`from_state` rebuilds the model."""
        return {"text": self.text, "categorical": int(self.categorical)}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> BoosterModel:
        """The model :meth:`state` wrote (LightGBM parses its own text format; needs the ``bench`` extra)."""
        text = str(state["text"])
        if not text.startswith("tree\n"):
            raise ValueError("not a LightGBM model's text")
        return cls(text=text, categorical=int(state["categorical"]))

    def __getstate__(self) -> dict[str, Any]:  # the estimator pickles: LightGBM's handle is rebuilt from the text
        return {"text": self.text, "categorical": self.categorical, "booster": None}


__all__ = ["NAME", "PARAMS", "BoosterModel", "available"]
