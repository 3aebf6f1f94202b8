"""Training with compressed cuts: ``compression="none"`` is today's run bit for bit, float16 and int8 train to a loss
close to exact while sending a fraction of the bytes, and each party's config chooses what it sends."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from vsplit.config import load_config
from vsplit.datasets import preset
from vsplit.estimator import SplitClassifier
from vsplit.node import PartyNode
from vsplit.pilot.configs import write_missing_configs
from vsplit.pilot.prepare import export_tables
from vsplit.transport.memory import memory_pair

TENSORS = {"Activations", "Gradients", "PackedActivations", "PackedGradients", "SparseGradients"}


def fit(views, frames=None, **options):
    frames_before = len(frames) if frames is not None else 0
    clf = SplitClassifier(label_party="bank", label="y", epochs=3, batch_size=64, random_state=0, alignment="join",
                          patience=None, candidates="network", **options).fit(views)
    sent = {}
    for sender, _, msg, frame in (frames or [])[frames_before:]:
        kind = type(msg).__name__
        if kind in TENSORS:
            sent.setdefault((sender, kind), 0)
            sent[(sender, kind)] += len(frame)
    return clf, sent


def parameters(clf) -> list[torch.Tensor]:
    parties = [clf.label_party_, *clf.feature_parties_.values(), *clf.compute_parties_.values()]
    return [t for p in parties for m in p.segment_models.values() for t in m.state_dict().values()]


@pytest.mark.parametrize("topology", ["vertical", "u_shaped"])
def test_compression_none_reaches_the_parameters_of_a_run_without_the_option_bit_for_bit(one_thread, views, topology):
    if topology == "u_shaped":
        views = {"bank": views["bank"]}
    plain, _ = fit(views, topology=topology)
    none, _ = fit(views, topology=topology, compression="none", error_feedback=False)
    a, b = parameters(plain), parameters(none)
    assert len(a) == len(b) > 0
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_float16_and_int8_train_close_to_exact_on_a_fraction_of_the_bytes(one_thread, views, frames):
    exact, exact_sent = fit(views, frames)
    assert set(exact_sent) == {("partner", "Activations"), ("bank", "Gradients")}
    losses = {}
    for name, feedback in (("float16", False), ("int8", False), ("int8", True)):
        clf, sent = fit(views, frames, compression=name, error_feedback=feedback)
        assert set(sent) == {("partner", "PackedActivations"), ("bank", "PackedGradients")}
        ratio = sum(sent.values()) / sum(exact_sent.values())
        assert ratio < (0.55 if name == "float16" else 0.36)  # width 16: int8's scale is a quarter of its row
        history = clf.history_
        assert all(np.isfinite(r["train_loss"]) and np.isfinite(r["val_loss"]) for r in history)
        losses[(name, feedback)] = history[-1]["train_loss"]
        assert abs(history[-1]["train_loss"] - exact.history_[-1]["train_loss"]) < 5e-3
        assert abs(clf.evaluate(views)["auc"] - exact.evaluate(views)["auc"]) < 0.01
        changed = [not torch.equal(x, y) for x, y in zip(parameters(exact), parameters(clf), strict=True)]
        assert any(changed)  # the codec really changed what crossed
    assert losses[("int8", True)] != losses[("int8", False)]  # error feedback acts


def test_a_topk_party_sends_sparse_gradients_and_plain_activations(one_thread, views, frames):
    clf, sent = fit({"bank": views["bank"]}, frames, topology="u_shaped", compression="topk_0.25")  # U-shaped: the
    # client sends activations and gradients, and so does the server
    assert ("bank", "SparseGradients") in sent and ("bank", "Activations") in sent
    assert ("server", "SparseGradients") in sent and ("server", "Activations") in sent
    assert not {kind for _, kind in sent} & {"PackedActivations", "PackedGradients", "Gradients"}
    assert all(np.isfinite(r["train_loss"]) for r in clf.history_)


# -- each party's config chooses what it sends -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("parties")
    data = preset("secretflow_bank")
    write_missing_configs(root, label=data.label, positive_label=data.positive_label)
    export_tables(data, root)
    return root


def run_pair(root, run_id, bank=(), partner=()):
    common = [f"output.run_id={run_id}", "train.epochs=1", "output.baselines=false"]
    nodes = {p: PartyNode(load_config(root / p / "party.toml", overrides=[*common, *extra], check_files=False),
                          progress=False) for p, extra in (("bank", bank), ("partner", partner))}
    bank_end, partner_end = memory_pair()
    results = {}
    worker = threading.Thread(target=lambda: results.update(partner=nodes["partner"].run({"bank": partner_end})))
    worker.start()
    results["bank"] = nodes["bank"].run({"partner": bank_end})
    worker.join(timeout=120)
    return results


def test_each_party_config_chooses_the_codec_of_what_it_sends(root):
    results = run_pair(root, "mixed", bank=['network.compression="topk_0.25"'],
                       partner=['network.compression="int8"', "network.error_feedback=true"])
    bank, partner = results["bank"].comm["sent"], results["partner"].comm["sent"]
    assert "SparseGradients" in bank and "Gradients" not in bank
    assert "PackedActivations" in partner and "Activations" not in partner
    assert 0.5 < results["bank"].test["auc"] <= 1.0
