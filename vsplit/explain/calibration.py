"""Are the predicted probabilities right? Reliability curve, Brier score, expected calibration error, and the label
party's calibration of its scores (temperature or isotonic), fitted on validation rows and applied in ``predict``.

A :class:`Calibrator` is plain numbers (a temperature, or the isotonic steps), saved as JSON, so that serving can apply
it without the training code: ``calibrated = calibrator.apply(probability)``.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> p_true = rng.uniform(0.05, 0.95, 4000)
    >>> y = (rng.random(4000) < p_true).astype(int)
    >>> logit = np.log(p_true / (1 - p_true))
    >>> overconfident = 1 / (1 + np.exp(-3 * logit))
    >>> cal = Calibrator.fit(y, overconfident, method="temperature")
    >>> before = expected_calibration_error(y, overconfident)
    >>> 2.5 < cal.temperature < 3.5, expected_calibration_error(y, cal.apply(overconfident)) < before
    (True, True)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vsplit.atomic import write_atomic
from vsplit.errors import ConfigError

METHODS = ("temperature", "isotonic")
#: probabilities are kept this far from 0 and 1 before taking log-odds
EPS = 1e-7


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), EPS, 1 - EPS)
    return np.log(p / (1 - p))


def reliability_curve(y: np.ndarray, p: np.ndarray, *, bins: int = 10) -> pd.DataFrame:
    """Equal-width probability bins: each bin's mean predicted probability, observed rate of positives and rows.

    >>> reliability_curve(np.array([0, 1, 1, 0]), np.array([0.1, 0.9, 0.8, 0.3]), bins=2).round(3).values.tolist()
    [[0.0, 0.2, 0.0, 2.0], [1.0, 0.85, 1.0, 2.0]]
    """
    y, p = np.asarray(y, dtype=float), np.asarray(p, dtype=float)
    which = np.minimum((p * bins).astype(int), bins - 1)
    rows = []
    for b in range(bins):
        inside = which == b
        if inside.any():
            rows.append((b, float(p[inside].mean()), float(y[inside].mean()), int(inside.sum())))
    return pd.DataFrame(rows, columns=["bin", "mean_predicted", "observed_rate", "rows"]).astype(float)


def expected_calibration_error(y: np.ndarray, p: np.ndarray, *, bins: int = 10) -> float:
    """The rows-weighted mean gap between predicted and observed rates over :func:`reliability_curve`'s bins."""
    curve = reliability_curve(y, p, bins=bins)
    if curve.empty:
        return float("nan")
    gaps = (curve["mean_predicted"] - curve["observed_rate"]).abs()
    return float((gaps * curve["rows"]).sum() / curve["rows"].sum())


def brier_score(y: np.ndarray, p: np.ndarray) -> float:
    """Mean squared gap between the probability and the outcome (0 is perfect)."""
    y, p = np.asarray(y, dtype=float), np.asarray(p, dtype=float)
    return float(np.mean((p - y) ** 2))


def calibration_summary(y: np.ndarray, p: np.ndarray, *, bins: int = 10) -> dict[str, Any]:
    """Brier score, expected calibration error and the reliability curve, as plain numbers (for reports)."""
    return {"brier": brier_score(y, p), "ece": expected_calibration_error(y, p, bins=bins), "bins": bins,
            "curve": reliability_curve(y, p, bins=bins).to_dict(orient="list")}


@dataclass(frozen=True)
class Calibrator:
    """A fitted map from the model's probability to a calibrated one: ``temperature`` divides the log-odds;
    ``isotonic`` is a non-decreasing step function through ``(x, y)`` (linear between, clipped outside)."""

    method: str
    temperature: float = 1.0
    x: tuple[float, ...] = field(default=())
    y: tuple[float, ...] = field(default=())

    @classmethod
    def fit(cls, y: np.ndarray, p: np.ndarray, *, method: str = "temperature") -> Calibrator:
        """Fit on validation rows' labels ``y`` (0/1) and the model's probabilities ``p``."""
        if method not in METHODS:
            raise ConfigError(f"calibration method must be one of {METHODS}, got {method!r}")
        y, p = np.asarray(y, dtype=float), np.asarray(p, dtype=float)
        if len(y) < 10 or len(np.unique(y)) < 2:
            raise ConfigError("calibration needs validation rows of both classes (at least 10 rows); pass more")
        if method == "isotonic":
            from sklearn.isotonic import IsotonicRegression

            fitted = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(p, y)
            return cls(method=method, x=tuple(map(float, fitted.X_thresholds_)),
                       y=tuple(map(float, fitted.y_thresholds_)))
        from scipy.optimize import minimize_scalar

        z = _logit(p)

        def loss(log_t: float) -> float:
            q = np.clip(1 / (1 + np.exp(-z / np.exp(log_t))), EPS, 1 - EPS)
            return float(-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q)))

        best = minimize_scalar(loss, bounds=(-5.0, 5.0), method="bounded")
        return cls(method=method, temperature=float(np.exp(best.x)))

    def apply(self, p: np.ndarray) -> np.ndarray:
        """The calibrated probabilities of ``p`` (NaN stays NaN)."""
        p = np.asarray(p, dtype=float)
        if self.method == "temperature":
            return 1 / (1 + np.exp(-_logit(p) / self.temperature))
        out = np.interp(p, self.x, self.y)
        return np.where(np.isnan(p), np.nan, out)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "temperature": self.temperature, "x": list(self.x), "y": list(self.y)}

    @classmethod
    def from_dict(cls, state: dict[str, Any], *, where: str = "calibration file") -> Calibrator:
        if not isinstance(state, dict):
            raise ConfigError(f"{where}: expected a JSON object with \"method\", got {type(state).__name__}")
        method = state.get("method")
        if method not in METHODS:
            raise ConfigError(f"{where}: method must be one of {METHODS}, got {str(method)[:40]!r}")
        temperature = _number(state.get("temperature", 1.0), f"{where}: temperature")
        x, y = (tuple(_number(v, f"{where}: {axis}") for v in _list(state.get(axis, []), f"{where}: {axis}"))
                for axis in ("x", "y"))
        out = cls(method=method, temperature=temperature, x=x, y=y)
        if not (np.isfinite(out.temperature) and out.temperature > 0):
            raise ConfigError(f"{where}: temperature must be a positive number, got {out.temperature}")
        if method == "isotonic" and (len(out.x) != len(out.y) or not out.x or not np.all(np.isfinite(out.x + out.y))
                                     or np.any(np.diff(out.x) < 0)):
            raise ConfigError(f"{where}: isotonic steps need finite x and y of one length, x in increasing order")
        return out

    def save(self, path: Path) -> Path:
        """Write this calibrator as JSON (atomically)."""
        write_atomic(path, (json.dumps(self.to_dict(), indent=2) + "\n").encode())
        return path

    @classmethod
    def load(cls, path: Path) -> Calibrator:
        """The calibrator saved at ``path``; a :class:`~vsplit.errors.ConfigError` naming the file if it is not one."""
        fix = "delete it and fit again with vsplit calibrate"
        try:
            state = json.loads(Path(path).read_bytes().decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, or nested past Python's limit
            raise ConfigError(f"{path}: not a calibration file ({type(exc).__name__}); {fix}") from None
        return cls.from_dict(state, where=str(path))


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: expected a number, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        raise ConfigError(f"{where}: {str(value)[:20]}... does not fit a float") from None


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list of numbers, got {type(value).__name__}")
    return value


#: the label party's calibration in its run folder, applied by ``vsplit predict`` when present
FILE = "calibration.json"


def calibrated(folder: Path, proba: np.ndarray) -> np.ndarray:
    """``proba`` through the calibration saved in the run ``folder`` (:data:`FILE`), or as it is if there is none
    (or the scores are not one probability per row)."""
    path = Path(folder) / FILE
    if not path.is_file() or np.ndim(proba) != 1:
        return proba
    return Calibrator.load(path).apply(proba)


def fit_from_predictions(predictions: pd.DataFrame, labels: pd.DataFrame, *, id_column: str, label: str,
                         positive_label: Any, method: str = "temperature") -> Calibrator:
    """A calibrator fitted on a prediction job's scores (``predictions.csv``: ``id_column``, ``probability``) of
    validation rows and the label party's labels of the same IDs (rows without both are left out)."""
    scored = predictions[predictions.get("status", "scored") == "scored"] if "status" in predictions else predictions
    joined = scored[[id_column, "probability"]].astype({id_column: str}).merge(
        labels[[id_column, label]].astype({id_column: str}), on=id_column, how="inner")
    if joined.empty:
        raise ConfigError(f"calibration: no ID of the predictions is in the labelled table ({id_column!r}); score "
                          "validation rows with vsplit predict first")
    positive = positive_label if positive_label is not None else 1
    y = (joined[label].astype(str) == str(positive)).astype(int).to_numpy()
    return Calibrator.fit(y, joined["probability"].astype(float).to_numpy(), method=method)
