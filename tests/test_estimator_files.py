"""A fitted estimator is kept with the usual tools (pickle, joblib) and with its own file format (``save``/``load``:
arrays and JSON, no pickle), and scores the same afterwards, to the bit."""

from __future__ import annotations

import io
import pickle
import warnings

import joblib
import numpy as np
import pandas as pd
import pytest
import torch

from vsplit.bagging import SplitBag
from vsplit.errors import CheckpointError, ConfigError, UnreadableCheckpoint
from vsplit.estimator import SplitClassifier, SplitRegressor


def _views(n: int = 240, *, unknown: int = 0) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(1)
    ids = [str(i) for i in range(n)]
    x, age = rng.normal(size=n), rng.normal(size=n)
    bank = pd.DataFrame({"customer_id": ids, "age": age, "job": rng.choice(["clerk", "nurse", "chef"], n),
                         "flag": np.ones(n), "y": (x + age > 0).astype(int), "amount": 2 * x + age})
    shop = pd.DataFrame({"customer_id": ids[unknown:][::-1], "x": x[unknown:][::-1]})
    return {"bank": bank, "shop": shop}


@pytest.fixture(scope="module")
def fitted() -> dict:
    views = _views()
    out = {"views": views}
    bank_y = {"bank": views["bank"].drop(columns=["amount"]), "shop": views["shop"]}
    out["split"] = SplitClassifier(epochs=2, random_state=0, fallback=True, candidates="network").fit(
        _views(unknown=20))
    out["split"].calibrate(_views(unknown=20))
    out["alone"] = SplitClassifier(epochs=1, mode="label_party_only", numeric_embedding="periodic",
                                   random_state=0).fit(bank_y)
    out["pooled"] = SplitClassifier(epochs=1, mode="centralized", members=2, random_state=0).fit(bank_y)
    out["regressor"] = SplitRegressor(label="amount", epochs=1, random_state=0).fit(
        {"bank": views["bank"].drop(columns=["y"]), "shop": views["shop"]})
    out["bag"] = SplitBag(networks=2, epochs=1, random_state=0).fit(bank_y)
    return out


def _score(est, views) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if isinstance(est, SplitRegressor):
            return est.predict(views)
        return est.predict_proba(views)


def _views_for(name: str, views: dict) -> dict:
    if name == "regressor":
        return {"bank": views["bank"].drop(columns=["y"]), "shop": views["shop"]}
    if name == "split":
        return _views(unknown=20)
    return {"bank": views["bank"].drop(columns=["amount"]), "shop": views["shop"]}


@pytest.mark.parametrize("name", ["split", "alone", "pooled", "regressor", "bag"])
def test_fitted_estimator_pickles_and_joblib_dumps_and_scores_the_same(fitted, name):
    est, views = fitted[name], _views_for(name, fitted["views"])
    again = pickle.loads(pickle.dumps(est))
    buffer = io.BytesIO()
    joblib.dump(est, buffer)
    buffer.seek(0)
    third = joblib.load(buffer)
    want = _score(est, views)
    assert np.array_equal(_score(again, views), want, equal_nan=True)
    assert np.array_equal(_score(third, views), want, equal_nan=True)
    if name == "split":  # the traffic statistics stay; the live pumps (memory queues) do not
        assert again.pumps_["shop"].stats.total("sent") == est.pumps_["shop"].stats.total("sent") > 0


@pytest.mark.parametrize("name", ["split", "alone", "pooled", "regressor", "bag"])
def test_saved_estimator_loads_without_pickle_and_scores_to_the_bit(fitted, name, tmp_path):
    est, views = fitted[name], _views_for(name, fitted["views"])
    path = est.save(tmp_path / "model.npz")
    with np.load(path, allow_pickle=False) as archive:  # an archive of arrays; it never needs pickle
        assert all(archive[k].dtype != object for k in archive.files)
    loaded = type(est).load(path)
    assert type(loaded) is type(est)
    assert np.array_equal(_score(loaded, views), _score(est, views), equal_nan=True)
    if name == "split":
        assert loaded.calibrator_ == est.calibrator_ and loaded.fallback_ is not None
        assert (loaded.scored_by(views) == est.scored_by(views)).all() and (est.scored_by(views) == "bank_only").any()
        assert loaded.best_epoch_ == est.best_epoch_ and loaded.classes_.tolist() == est.classes_.tolist()
        assert loaded.evaluate(views) == est.evaluate(views)
        e1, e2 = loaded.explain(views, steps=4), est.explain(views, steps=4)
        assert np.array_equal(e1.features.to_numpy(), e2.features.to_numpy())
    if name != "bag":
        assert not hasattr(loaded.label_party_, "inputs") or len(loaded.label_party_.inputs[0]) == 0  # no rows kept


def test_loading_refuses_another_class_a_damaged_file_and_saving_refuses_modules_of_your_own(fitted, tmp_path):
    path = fitted["split"].save(tmp_path / "clf.npz")
    with pytest.raises(ConfigError, match="holds a SplitClassifier, not a SplitRegressor"):
        SplitRegressor.load(path)
    with pytest.raises(ConfigError, match="no saved estimator"):
        SplitClassifier.load(tmp_path / "nothing.npz")
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2: len(raw) // 2 + 64] = b"\x00" * 64
    (tmp_path / "bad.npz").write_bytes(bytes(raw))
    with pytest.raises((CheckpointError, UnreadableCheckpoint)):
        SplitClassifier.load(tmp_path / "bad.npz")
    views = _views()
    own = SplitClassifier(epochs=1, random_state=0, models={"shop": _Bottom()}, candidates="network").fit(
        {"bank": views["bank"].drop(columns=["amount"]), "shop": views["shop"]})
    with pytest.raises(ConfigError, match=r"models.*pickle or joblib"):
        own.save(tmp_path / "own.npz")


class _Bottom(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(1, 4)

    def forward(self, cat: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
        return self.linear(num)
