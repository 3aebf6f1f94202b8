"""The image case of the classic configurations: 8x8 digits with a small CNN client segment, vanilla and U-shaped,
multiclass; split training equals the topology placed on one party and learns the digits."""

from __future__ import annotations

import pytest
import torch

from vsplit.datasets import preset
from vsplit.estimator import SplitClassifier
from vsplit.models.segments import ImageHead


@pytest.fixture(scope="module")
def digits():
    return preset("digits", seed=0)


def fit(kind: str, mode: str, views: dict) -> SplitClassifier:
    head = ImageHead()  # unseeded: fit resets the user's module from random_state
    label_party = "client" if kind == "u_shaped" else "server"
    return SplitClassifier(label_party=label_party, label="digit", task="multiclass", topology=kind, mode=mode,
                           epochs=8, batch_size=64, lr=3e-3, embedding_width=head.out_width, scaling="standard",
                           segments={"head" if kind == "u_shaped" else "bottom": head}, random_state=0).fit(views)


def views_for(kind: str, table):
    if kind == "u_shaped":
        return {"client": table}
    return {"server": table[["customer_id", "digit"]], "client": table.drop(columns=["digit"])}


@pytest.mark.parametrize("kind", ["vanilla", "u_shaped"])
def test_digits_split_equals_placed_and_learns(digits, kind, one_thread):
    split = fit(kind, "split", views_for(kind, digits.train["client"]))
    placed = fit(kind, "centralized", views_for(kind, digits.train["client"]))
    for seg in split.topology_.segments:
        a = split._party(seg.owner).segment_models[seg.name]
        b = placed.label_party_.segment_models[seg.name] if seg.owner == split.label_party else (
            placed._party(seg.owner).segment_models[seg.name])
        for x, y in zip(a.parameters(), b.parameters(), strict=True):
            assert torch.allclose(x, y, atol=1e-6), seg.name
    metrics = split.evaluate(views_for(kind, digits.test["client"]))
    assert metrics["accuracy"] > 0.9, metrics
    assert split.predict(views_for(kind, digits.test["client"])).shape == (len(digits.test["client"]),)
