"""What is learned from the labels: ``binary``, ``multiclass`` or ``regression``.

A task turns a label column into training targets (:meth:`Task.encode`, and :meth:`Task.encode_with` for new tables
with the fitted encoding), says how wide the last layer must be, supplies the loss, turns raw outputs into
predictions, and scores them with scikit-learn. ``score`` is what early stopping maximises: the task's ``primary``
metric oriented so that higher is better, falling back to minus the log loss when the primary metric is undefined
(e.g. AUC on a validation set with one class).

Bring your own task by passing any object with the methods of :class:`Task` instead of a name.

Example:
    >>> import pandas as pd, torch
    >>> task = make_task("multiclass")
    >>> targets, info = task.encode(pd.Series(["b", "a", "c", "a"]), name="grade")
    >>> targets.tolist(), info, task.output_width(len(info["classes"]))
    ([1, 0, 2, 0], {'classes': ['a', 'b', 'c']}, 3)
    >>> task.predict(torch.zeros(2, 3)).round(3).tolist()
    [[0.333, 0.333, 0.333], [0.333, 0.333, 0.333]]
    >>> make_task("binary").primary, make_task("regression").higher_is_better
    ('auc', False)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from vsplit.data.labels import positive_class
from vsplit.errors import ConfigError, DataError
from vsplit.metrics import binary_metrics
from vsplit.models.registry import Registry


@runtime_checkable
class Task(Protocol):
    """What the training engine needs from a task (built-in or your own)."""

    name: str
    primary: str
    higher_is_better: bool

    def output_width(self, n_classes: int | None) -> int: ...

    def encode(
        self, labels: pd.Series, *, name: str, positive_label: object = None
    ) -> tuple[torch.Tensor, dict[str, Any]]: ...

    def encode_with(self, labels: pd.Series, info: dict[str, Any]) -> torch.Tensor: ...

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor: ...

    def predict(self, outputs: torch.Tensor) -> np.ndarray: ...

    def metrics(self, targets: np.ndarray, predictions: np.ndarray) -> dict[str, float]: ...

    def score(self, targets: np.ndarray, predictions: np.ndarray) -> float: ...


TASKS: Registry[type] = Registry("task")
#: how to learn more than two classes, in a party config and in the estimator
MORE_CLASSES = ('for more classes set topology.task = "multiclass" in the party config, task="multiclass" in '
                "SplitClassifier")

_MEMBERS = (
    "name", "primary", "higher_is_better", "output_width", "encode", "encode_with", "loss", "predict", "metrics",
    "score",
)


def make_task(name: str | Task) -> Task:
    """The task called ``name`` (a task object is returned as it is).

    Example:
        >>> make_task("ranking")
        Traceback (most recent call last):
        ...
        vsplit.errors.ConfigError: unknown task 'ranking'; choose one of: binary, multiclass, regression
    """
    if not isinstance(name, str):
        missing = [m for m in _MEMBERS if not hasattr(name, m)]
        if missing:
            raise ConfigError(
                f"task {type(name).__name__} lacks {', '.join(missing)}; give it the members of "
                "vsplit.models.tasks.Task or pass a name"
            )
        return name
    return TASKS.get(name)()


def detect_positive(labels: pd.Series, name: str) -> object:
    """The positive class of a binary label column, or a :class:`DataError` asking for ``positive_label``.

    Example:
        >>> detect_positive(pd.Series(["no", "yes", "no"]), "y")
        'yes'
    """
    values = set(labels.dropna().unique().tolist())
    if len(values) != 2:
        raise DataError(
            f"label {name!r} has {len(values)} distinct values; a binary task needs two ({MORE_CLASSES})"
        )
    return positive_class(values, name)


def binarise(labels: pd.Series, positive: object, name: str) -> torch.Tensor:
    """0/1 float tensor of ``labels`` with ``positive`` as 1.

    Example:
        >>> binarise(pd.Series(["no", "yes"]), "yes", "y").tolist()
        [0.0, 1.0]
    """
    _refuse_missing(labels, name)
    values = set(labels.unique().tolist())
    if positive not in values and len(values) == 2:
        raise DataError(
            f"positive_label {positive!r} does not occur in label {name!r} (values {sorted(map(str, values))})"
        )
    if len(values) > 2:
        raise DataError(
            f"label {name!r} has {len(values)} distinct values; a binary task needs two ({MORE_CLASSES})"
        )
    return torch.from_numpy((labels.to_numpy() == positive).astype(np.float32))


def _refuse_missing(labels: pd.Series, name: str) -> None:
    if labels.isna().any():
        rows = ", ".join(str(r + 1) for r in np.flatnonzero(labels.isna().to_numpy())[:5])
        raise DataError(f"label {name!r} has {int(labels.isna().sum())} missing values (rows {rows}, counted from 1); "
                        "drop those rows")


def _column(labels: pd.Series) -> str:
    return str(labels.name) if labels.name is not None else "label"


def _flat(outputs: torch.Tensor) -> torch.Tensor:
    """Outputs of shape (n, 1) as (n,)."""
    return outputs.squeeze(1) if outputs.dim() == 2 and outputs.shape[1] == 1 else outputs


class _Scored:
    """``score``: the primary metric, higher is better, minus the log loss when the primary metric is NaN."""

    primary: str
    higher_is_better: bool

    def metrics(self, targets: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
        raise NotImplementedError

    def score(self, targets: np.ndarray, predictions: np.ndarray) -> float:
        values = self.metrics(targets, predictions)
        value = values[self.primary]
        if math.isnan(value) and "log_loss" in values:
            return -values["log_loss"]
        return value if self.higher_is_better else -value


@TASKS.register("binary")
@dataclass(frozen=True)
class Binary(_Scored):
    """Two classes: one logit, BCE-with-logits, AUC for early stopping.

    Example:
        >>> import torch
        >>> Binary().predict(torch.zeros(3, 1)).tolist()
        [0.5, 0.5, 0.5]
    """

    name: str = "binary"
    primary: str = "auc"
    higher_is_better: bool = True

    def output_width(self, n_classes: int | None = None) -> int:
        return 1

    def encode(
        self, labels: pd.Series, *, name: str, positive_label: object = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        positive = positive_label if positive_label is not None else detect_positive(labels, name)
        return binarise(labels, positive, name), {"positive_label": positive}

    def encode_with(self, labels: pd.Series, info: dict[str, Any]) -> torch.Tensor:
        return binarise(labels, info["positive_label"], _column(labels))

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(_flat(outputs), targets.to(outputs.dtype))

    def predict(self, outputs: torch.Tensor) -> np.ndarray:
        return torch.sigmoid(_flat(outputs.detach())).double().numpy()

    def metrics(self, targets: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
        return binary_metrics(np.asarray(targets), np.asarray(predictions))


@TASKS.register("multiclass")
@dataclass(frozen=True)
class Multiclass(_Scored):
    """C classes: C logits, cross-entropy, accuracy for early stopping.

    Example:
        >>> import pandas as pd
        >>> Multiclass().encode_with(pd.Series([3, 1]), {"classes": [1, 2, 3]}).tolist()
        [2, 0]
    """

    name: str = "multiclass"
    primary: str = "accuracy"
    higher_is_better: bool = True

    def output_width(self, n_classes: int | None) -> int:
        if n_classes is None or n_classes < 2:
            raise ConfigError(f"a multiclass task needs the number of classes (>= 2), got {n_classes!r}")
        return n_classes

    def encode(
        self, labels: pd.Series, *, name: str, positive_label: object = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        _refuse_missing(labels, name)
        values = labels.unique().tolist()
        if len(values) < 2:
            raise DataError(f"label {name!r} has a single class {values!r}; a classifier needs at least two")
        try:
            classes = sorted(values)
        except TypeError:  # mixed types: a stable order all the same
            classes = sorted(values, key=lambda v: (type(v).__name__, str(v)))
        info = {"classes": classes}
        return self._codes(labels, classes, name), info

    def encode_with(self, labels: pd.Series, info: dict[str, Any]) -> torch.Tensor:
        name = _column(labels)
        _refuse_missing(labels, name)
        return self._codes(labels, list(info["classes"]), name)

    @staticmethod
    def _codes(labels: pd.Series, classes: list[Any], name: str) -> torch.Tensor:
        index = {c: i for i, c in enumerate(classes)}
        unseen = sorted({str(v) for v in labels.unique().tolist() if v not in index})
        if unseen:
            raise DataError(
                f"label {name!r} has classes {unseen} that training never saw (known: {[str(c) for c in classes]}); "
                "drop those rows or retrain with them"
            )
        return torch.tensor([index[v] for v in labels.tolist()], dtype=torch.int64)

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(outputs, targets)

    def predict(self, outputs: torch.Tensor) -> np.ndarray:
        return torch.softmax(outputs.detach(), dim=1).double().numpy()

    def metrics(self, targets: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
        from sklearn import metrics as skm  # here, not at import: a partner never scores

        y = np.asarray(targets).astype(int)
        proba = np.asarray(predictions, dtype=np.float64)
        labels = list(range(proba.shape[1]))
        present = len(np.unique(y)) == len(labels)
        clipped = np.clip(proba, 1e-7, 1.0)
        clipped /= clipped.sum(1, keepdims=True)
        return {
            "accuracy": float(skm.accuracy_score(y, proba.argmax(1))),
            "macro_auc": float(skm.roc_auc_score(y, proba, multi_class="ovr", labels=labels)) if present else math.nan,
            "log_loss": float(skm.log_loss(y, clipped, labels=labels)),
        }


@TASKS.register("regression")
@dataclass(frozen=True)
class Regression(_Scored):
    """A real number: one output, mean squared error, RMSE (lower is better) for early stopping.

    Example:
        >>> import numpy as np
        >>> Regression().score(np.array([1.0, 3.0]), np.array([2.0, 2.0]))
        -1.0
    """

    name: str = "regression"
    primary: str = "rmse"
    higher_is_better: bool = False

    def output_width(self, n_classes: int | None = None) -> int:
        return 1

    def encode(
        self, labels: pd.Series, *, name: str, positive_label: object = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        if not pd.api.types.is_numeric_dtype(labels) or pd.api.types.is_bool_dtype(labels):
            raise DataError(
                f"label {name!r} has dtype {labels.dtype}, not numbers; convert it (pandas.to_numeric) "
                "or learn classes: topology.task = \"binary\" or \"multiclass\" in a party config (task= in "
                "SplitClassifier)"
            )
        _refuse_missing(labels, name)
        values = labels.to_numpy(dtype=np.float64)
        if not np.isfinite(values).all():
            raise DataError(f"label {name!r} has {int((~np.isfinite(values)).sum())} infinite values; drop those rows")
        return torch.from_numpy(values.astype(np.float32)), {}

    def encode_with(self, labels: pd.Series, info: dict[str, Any]) -> torch.Tensor:
        return self.encode(labels, name=_column(labels))[0]

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(_flat(outputs), targets.to(outputs.dtype))

    def predict(self, outputs: torch.Tensor) -> np.ndarray:
        return _flat(outputs.detach()).double().numpy()

    def metrics(self, targets: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
        from sklearn import metrics as skm  # here, not at import: a partner never scores

        y, p = np.asarray(targets, dtype=np.float64), np.asarray(predictions, dtype=np.float64)
        return {
            "rmse": float(math.sqrt(skm.mean_squared_error(y, p))),
            "mae": float(skm.mean_absolute_error(y, p)),
            "r2": float(skm.r2_score(y, p)) if len(y) > 1 else math.nan,
        }
