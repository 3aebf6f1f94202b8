"""A fitted notebook estimator in a file without pickle: :meth:`SplitClassifier.save` and ``.load``.

Theory of operation. The file is a checkpoint (:mod:`vsplit.runtime.checkpoint`: tensors in an ``.npz`` archive,
everything else JSON, written atomically, read with ``allow_pickle=False`` and every array's size checked), so
loading one never runs code from it. It holds what scoring needs, and of the training rows only their mean: the
parameters, each party's fitted preprocessing (:meth:`~vsplit.data.preprocess.TablePreprocessor.state`), the
reference row its explanations start from (the mean of its training rows, :class:`~vsplit.explain.paths.Baseline`),
the shape of each default bottom (:mod:`vsplit.models.rebuild`), every trained module's ``state_dict``, the fitted
attributes that describe the model (``classes_``, ``history_``, ``best_epoch_``, ...), the calibration, the
bank-only fallback and a blend's scorecard (its WOE maps and coefficients, :meth:`vsplit.SplitScorecard.state`).
``load`` (:func:`read`, then :func:`restore`) builds each party again from these (no table needed), then loads the
weights: ``predict_proba`` of the loaded estimator equals the saved one's, bit for bit. ``rows_`` and ``psi_stats_``
(about the training rows) are not kept. Modules of your own (``models``, ``segments``), hooks, callbacks, a topology
object or an optimizer factory cannot be written as data: saving refuses them (pickle or joblib keep them).
:class:`~vsplit.bagging.SplitBag` saves each of its networks the same way, in one file.

Example:
    >>> import tempfile, pathlib, numpy as np, pandas as pd
    >>> from vsplit.estimator import SplitClassifier
    >>> rng = np.random.default_rng(0)
    >>> ids = [str(i) for i in range(200)]
    >>> x = rng.normal(size=200)
    >>> views = {"bank": pd.DataFrame({"customer_id": ids, "age": rng.normal(size=200), "y": (x > 0).astype(int)}),
    ...          "shop": pd.DataFrame({"customer_id": ids, "x": x})}
    >>> clf = SplitClassifier(epochs=1, random_state=0).fit(views)
    >>> path = clf.save(pathlib.Path(tempfile.mkdtemp()) / "model.vsplit.npz")
    >>> again = SplitClassifier.load(path)
    >>> bool(np.array_equal(again.predict_proba(views), clf.predict_proba(views)))
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vsplit.errors import CheckpointError, ConfigError

#: the ``run_id`` and ``party`` a file of this format records (the checkpoint's own checks then refuse other files)
FORMAT, KIND = "vsplit-estimator-1", "estimator"
#: parameters that hold objects rather than data: saved only at their defaults
OBJECTS = ("models", "segments", "hooks", "callbacks")


def save(estimator: Any, path: str | Path) -> Path:
    """Write the fitted ``estimator`` (a :class:`SplitClassifier`, :class:`SplitRegressor` or, with ``estimators_``,
    a :class:`~vsplit.bagging.SplitBag`) to ``path`` atomically; returns the path."""
    from vsplit.runtime.checkpoint import save_checkpoint

    if hasattr(estimator, "estimators_"):  # a bag of networks
        state = {"class": type(estimator).__name__, "networks": estimator.networks, "refit": estimator.refit,
                 "params": _params(estimator.params), "epochs": list(estimator.epochs_),
                 "members": [_state(e) for e in estimator.estimators_]}
    else:
        state = _state(estimator)
    path = Path(path)
    save_checkpoint(path, state, run_id=FORMAT, party=KIND)
    return path


def read(path: str | Path, *, expect: str) -> dict[str, Any]:
    """The state :func:`save` wrote to ``path``, checked to be of class ``expect`` (its name)."""
    from vsplit.runtime.checkpoint import load_checkpoint

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no saved estimator at {path}; save one with clf.save(path)")
    try:
        state = load_checkpoint(path, run_id=FORMAT, party=KIND)
    except CheckpointError as exc:
        raise CheckpointError(f"{path} is not an estimator file written by clf.save ({exc})") from None
    if state.get("class") != expect:
        raise ConfigError(f"{path} holds a {state.get('class')}, not a {expect}; load it with {state.get('class')}"
                          ".load")
    return state


def restore(path: str | Path, state: dict[str, Any], cls: type) -> Any:
    """A fitted estimator of class ``cls`` from ``state`` (:func:`read` of ``path``); a state that does not fit
    raises :class:`~vsplit.errors.UnreadableCheckpoint` naming ``path``."""
    from vsplit.runtime.checkpoint import interpreting

    with interpreting(path, fix="save the estimator again"):
        return _restore(state, cls)


# -- writing -------------------------------------------------------------------------------------------------------
def _params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters as JSON data, refusing those that hold objects (named, with what to do instead)."""
    out = {}
    for key, value in params.items():
        if key in OBJECTS and value:
            raise ConfigError(f"save: the parameter {key!r} holds objects, which this file format does not store; "
                              "keep such an estimator with pickle or joblib (joblib.dump(clf, path))")
        if key in OBJECTS:
            value = None if key != "callbacks" else []
        elif not _plain(value):
            raise ConfigError(f"save: the parameter {key}={value!r} is not plain data (a name or a number); keep "
                              "such an estimator with pickle or joblib")
        out[key] = list(value) if isinstance(value, tuple) else value
    return out


def _plain(value: Any) -> bool:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _json(value: Any) -> Any:
    """NumPy scalars and arrays as plain numbers and lists, recursively."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return [_json(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    return value


def _party_state(party: Any) -> dict[str, Any]:
    """A party's preprocessing, the shape of its default bottom and its label's description (label party)."""
    from vsplit.models.rebuild import bottom_spec

    out: dict[str, Any] = {"feature_columns": list(getattr(party, "feature_columns", [])),
                           "preprocessor": party.preprocessor.state() if getattr(party, "preprocessor", None) else None,
                           "numeric_kind": getattr(party, "numeric_kind", None), "bottom": None}
    if getattr(party, "model", None) is not None:
        out["bottom"] = bottom_spec(party.model)
        if out["bottom"] is None:
            raise ConfigError(f"save: party {party.name!r} trains a bottom module of its own, which this file format "
                              "does not store; keep such an estimator with pickle or joblib")
    if hasattr(party, "label_info"):
        out["label_info"] = _json(party.label_info)
    inputs = getattr(party, "inputs", None)
    if out["bottom"] is not None and inputs is not None and len(inputs[1]):  # the explanations' reference row
        from vsplit.explain.paths import Baseline

        base = Baseline.fit(party.model, inputs)
        out["baseline"] = {"num": base.num, "cat": None if base.cat is None else list(base.cat)}
    return out


def _state(est: Any) -> dict[str, Any]:
    from sklearn.utils.validation import check_is_fitted

    from vsplit.topology.graph import Topology

    check_is_fitted(est, "result_")
    if isinstance(est.topology, Topology) or not isinstance(est.task, (str, type(None))) or callable(est.optimizer):
        raise ConfigError("save: a topology object, a task object or an optimizer factory is not data this file "
                          "format stores; keep such an estimator with pickle or joblib")
    parties = {est.label_party: est.label_party_, **est.feature_parties_, **est.compute_parties_}
    state: dict[str, Any] = {
        "class": type(est).__name__,
        "params": _params(est.get_params(deep=False)),
        "parties": {n: {"kind": _kind(est, n), **_party_state(p)} for n, p in parties.items()},
        "segments": {s: m.state_dict() for s, m in est.modules_.items()},
        "fitted": _fitted(est),
        "calibrator": None, "fallback": None, "scorecard": None,
    }
    scorecard = getattr(est, "scorecard_", None)
    if scorecard is not None:  # the blend's scorecard (candidates): its maps and coefficients, as data
        state["scorecard"] = {"params": _params(scorecard.get_params(deep=False)), "state": scorecard.state()}
    calibrator = getattr(est, "calibrator_", None)
    if calibrator is not None:
        state["calibrator"] = {"method": calibrator.method, "temperature": calibrator.temperature,
                               "x": list(calibrator.x), "y": list(calibrator.y)}
    fallback = getattr(est, "fallback_", None)
    if fallback is not None:
        modules = fallback.party.modules_for(fallback.run, task_width=fallback.party.task_width)
        state["fallback"] = {**_party_state(fallback.party), "history": _json(fallback.history),
                             "segments": {s: m.state_dict() for s, m in modules.items()},
                             "best_epoch": fallback.best_epoch, "chosen": getattr(fallback, "chosen", None),
                             "val_auc": _json(getattr(fallback, "val_auc", {})),
                             "logistic": fallback.logistic.state() if getattr(fallback, "logistic", None) else None}
    return state


def _fitted(est: Any) -> dict[str, Any]:
    """Every fitted attribute (``..._``) that is plain data (``classes_``, ``history_``, ``best_epoch_``, ...);
    the parties, modules, training result and traffic are kept otherwise or not at all."""
    skip = {"label_party_", "feature_parties_", "compute_parties_", "topology_", "modules_", "result_", "pumps_",
            "rows_", "psi_stats_", "fallback_", "calibrator_", "scorecard_"}
    out = {}
    for key, value in vars(est).items():
        if key.endswith("_") and not key.startswith("_") and key not in skip:
            value = _json(value)
            if _plain(value):
                out[key] = value
    return out


def _kind(est: Any, name: str) -> str:
    return "label" if name == est.label_party else ("feature" if name in est.feature_parties_ else "compute")


# -- reading -------------------------------------------------------------------------------------------------------
def _restore(state: dict[str, Any], cls: type) -> Any:
    est = cls(**{k: tuple(v) if k in ("bottom_hidden", "top_hidden") else v for k, v in state["params"].items()})
    settings = est._settings()
    parties = {name: _shell(est, name, saved, settings) for name, saved in state["parties"].items()}
    est.label_party_ = parties[est.label_party]
    est.feature_parties_ = {n: p for n, p in parties.items() if state["parties"][n]["kind"] == "feature"}
    est.compute_parties_ = {n: p for n, p in parties.items() if state["parties"][n]["kind"] == "compute"}
    est.topology_ = est._topology(list(est.feature_parties_))
    run = est._run_topology()
    placed = set() if run is est.topology_ else {
        s.name for s in run.segments if est.topology_.segment(s.name).owner != est.label_party}
    for name in run.parties:
        party = est._party(name)
        party.modules_for(run, task_width=_width(party), skip=sorted(placed) if name == est.label_party else ())
    for seg in placed:
        owner = est._party(est.topology_.segment(seg).owner)
        owner.modules_for(est.topology_, task_width=_width(owner))
    est.modules_ = est._trained_modules(run)
    for seg, module in est.modules_.items():
        module.load_state_dict(state["segments"][seg])
        module.eval()
    for key, value in state["fitted"].items():
        if not key.endswith("_"):
            raise ValueError(f"a fitted attribute {key!r} (they end in '_')")
        setattr(est, key, np.array(value) if key == "classes_" else value)
    est.result_ = None  # marks the estimator fitted (the training result itself is not kept)
    est.pumps_ = {}
    est.rows_ = {}
    if state.get("calibrator") is not None:
        from vsplit.explain.calibration import Calibrator

        c = state["calibrator"]
        est.calibrator_ = Calibrator(method=c["method"], temperature=float(c["temperature"]),
                                     x=tuple(map(float, c["x"])), y=tuple(map(float, c["y"])))
    est.fallback_ = _restore_fallback(est, state.get("fallback"), settings)
    est.scorecard_ = None
    if state.get("scorecard") is not None:
        from vsplit.scorecard_estimator import SplitScorecard

        est.scorecard_ = SplitScorecard.from_state(state["scorecard"]["state"], **state["scorecard"]["params"])
    return est


def _width(party: Any) -> int:
    return party.task_width if hasattr(party, "label_info") else 1


def _restore_fallback(est: Any, saved: dict[str, Any] | None, settings: Any) -> Any:
    if saved is None:
        return None
    from vsplit.app.fallback import BankOnly, own_topology

    party = _shell(est, est.label_party, {"kind": "label", **saved}, settings)
    run = own_topology(party)
    for seg, module in party.modules_for(run, task_width=party.task_width).items():
        module.load_state_dict(saved["segments"][seg])
        module.eval()
    model = BankOnly(party=party, run=run, history=saved["history"], best_epoch=saved["best_epoch"])
    if saved.get("chosen") is not None:  # the bank's best own model: its network or a logistic regression
        from vsplit.models.logistic import LogisticModel

        model.chosen = str(saved["chosen"])
        model.val_auc = {str(k): float(v) for k, v in dict(saved.get("val_auc") or {}).items()}
        model.logistic = LogisticModel.from_state(saved["logistic"]) if saved.get("logistic") else None
    return model


def _shell(est: Any, name: str, saved: dict[str, Any], settings: Any) -> Any:
    """Party ``name`` as fitted, built from its saved state with no table: its preprocessing, its default bottom
    (weights loaded afterwards) and, at the label party, its label's description; no training rows."""
    from vsplit.data.preprocess import TablePreprocessor
    from vsplit.models.rebuild import build_bottom
    from vsplit.models.rng import PartyRng
    from vsplit.models.seeds import derive_seed
    from vsplit.party import ComputeParty, FeatureParty, LabelParty, make_task

    kind = saved["kind"]
    cls = {"label": LabelParty, "feature": FeatureParty, "compute": ComputeParty}[kind]
    party = cls.__new__(cls)
    party.name, party.settings, party.seed = name, settings, est.random_state
    party.init_seed = est._init_seed(name)
    party.rng = PartyRng(derive_seed(party.init_seed, name, "rng"))
    party.model, party.inputs, party.segment_models = None, None, {}
    if kind == "compute":
        return party
    party.id_column = est.id_column
    party.ids = np.zeros(0, dtype=object)
    party.feature_columns = list(saved["feature_columns"])
    party._stream = None
    party.numeric_kind = saved["numeric_kind"]
    party.preprocessor = None
    if saved["preprocessor"] is not None:
        prep = party.preprocessor = TablePreprocessor.from_state(saved["preprocessor"])
        party.inputs = (torch.zeros((0, len(prep.categorical_)), dtype=torch.int64),
                        torch.zeros((0, prep.n_numeric), dtype=torch.float32))
    if saved["bottom"] is not None:
        party.model = build_bottom(saved["bottom"])
    if saved.get("baseline") is not None:  # the mean of its training rows, where explanations start from
        from vsplit.explain.paths import Baseline

        base = saved["baseline"]
        party.baseline = Baseline(num=torch.as_tensor(base["num"]),
                                  cat=None if base["cat"] is None else tuple(torch.as_tensor(c) for c in base["cat"]))
    if kind == "label":
        party.label = est.label
        party.task = make_task(est._task())
        party.label_info = dict(saved["label_info"])
        party.positive_label = party.label_info.get("positive_label")
        party.labels = torch.zeros(0)
    return party
