"""The hijacking red team on digits: FSHA improves its reconstructions when nobody watches; each client detector
flags it on a short run and stays quiet on an honest run with the same seed; a detector that fires stops the client
before its next activations leave."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from vsplit.errors import ConfigError, PrivacyAlarm
from vsplit.privacy.detectors import aligned, make_detector, plant_canaries
from vsplit.privacy.image_data import image_study
from vsplit.privacy.redteam import run_split
from vsplit.protocol.abort import Abort, AbortCode
from vsplit.protocol.training.messages import TRAIN

DETECTORS = ("gradient_scrutinizer", "splitguard", "splitout")


@pytest.fixture(scope="module")
def study():
    return image_study("digits", seed=0)


def test_fsha_reconstructions_improve_over_training_when_no_detector_runs(study, one_thread):
    out = run_split(study, seed=0, epochs=8, attack=True, detectors=[])
    ssim = np.array([h["ssim"] for h in out["history"]])
    assert len(ssim) == out["steps"] > 100
    assert ssim[:3].mean() < 0.1  # a decoder trained on nothing yet draws nothing
    assert ssim[-20:].mean() > ssim[:3].mean() + 0.4
    assert ssim[-20:].mean() > out["prior_ssim"]  # better than the mean public image: it sees this client's images
    assert out["first_step_ssim_0.3"] is not None and out["first_step_beating_prior"] is not None


def test_each_detector_flags_fsha_and_raises_no_alarm_on_an_honest_run_with_the_same_seed(study, one_thread):
    fsha = run_split(study, seed=0, epochs=5, attack=True, detectors=DETECTORS)
    honest = run_split(study, seed=0, epochs=5, attack=False, detectors=DETECTORS)
    for name in DETECTORS:
        assert fsha["detections"][name]["step"] is not None, name
        assert honest["detections"][name]["step"] is None, (name, honest["detections"][name])
    # the two that need no trained server flag it within three batches, before the reconstructions leak
    for name in ("gradient_scrutinizer", "splitout"):
        assert fsha["detections"][name]["step"] < fsha["first_step_ssim_0.3"], name
    assert honest["accuracy"] > 0.85


def test_a_detector_that_fires_stops_the_client_before_its_next_activations_leave(study, frames, one_thread):
    out = run_split(study, seed=0, epochs=2, attack=True, detectors=["gradient_scrutinizer"], stop=True)
    error = out["error"]  # what the estimator's fit raised
    assert isinstance(error, PrivacyAlarm) and out["stopped_by"] == "gradient_scrutinizer"
    assert "detector 'gradient_scrutinizer'" in str(error) and "cosine gap" in str(error)
    assert error.detection.step == 2
    sent = [m for s, _, m, _ in frames if s == "client" and "Activations" in type(m).__name__ and m.phase == TRAIN]
    # gradients of batches 0, 1 and 2 arrived; the third was judged before batch 3's activations were computed
    assert [(m.epoch, m.step) for m in sent] == [(0, 0), (0, 1), (0, 2)]
    aborts = [m for s, r, m, _ in frames if s == "client" and isinstance(m, Abort)]
    assert [(a.code) for a in aborts] == [AbortCode.CANCELLED]


def test_detectors_that_only_watch_leave_training_bit_identical(study, one_thread):
    from vsplit.estimator import SplitClassifier
    from vsplit.models.segments import ImageHead

    def fit(hooks):
        torch.manual_seed(0)
        head = ImageHead()
        SplitClassifier(label_party="server", label="digit", task="multiclass", topology="vanilla", epochs=1,
                        batch_size=64, embedding_width=head.out_width, scaling="standard", segments={"bottom": head},
                        hooks=hooks, random_state=0, alignment="join").fit(study.views("vanilla"))
        return list(head.parameters())

    labels = study.aligned_labels(study.private)
    watch = make_detector("gradient_scrutinizer:threshold=-1").bind(labels=labels)
    for a, b in zip(fit(None), fit(watch.hooks("client")), strict=True):
        assert torch.equal(a, b)
    assert watch.batches > 0 and not watch.detected


def test_canaries_are_copies_under_fresh_ids_with_a_wrong_label(study):
    client = study.private.drop(columns=[study.label])
    server = study.private[[study.id_column, study.label]]
    c, s, ids = plant_canaries(client, server, fraction=0.1, seed=0, label=study.label, classes=study.classes)
    assert len(ids) == round(0.1 * len(client)) and not set(ids) & set(client[study.id_column])
    assert all(len(i) == 5 and i.startswith("d") for i in ids)  # shaped like the preset's IDs
    copies = c.set_index(study.id_column).loc[ids]
    originals = pd.merge(copies.reset_index(), client, on=study.pixels)
    truth = server.set_index(study.id_column)[study.label]
    fake = s.set_index(study.id_column)[study.label]
    assert len(originals) >= len(ids)
    for _, row in originals.iterrows():
        assert fake[row[f"{study.id_column}_x"]] != truth[row[f"{study.id_column}_y"]]


def test_detector_configs_are_checked():
    assert make_detector("splitguard:start=5,window=3").window == 3
    with pytest.raises(ConfigError, match="choose one of: gradient_scrutinizer, splitguard, splitout"):
        make_detector("tripwire")
    with pytest.raises(ConfigError, match="valid options: stop, threshold, window"):
        make_detector("gradient_scrutinizer:limit=1")
    with pytest.raises(ConfigError, match="no labels bound"):
        make_detector("gradient_scrutinizer")(torch.ones(4, 2), _info())
    assert aligned(np.array(["b", "a"], dtype=object), np.array([1, 2])).tolist() == [2, 1]


def _info():
    from vsplit.protocol.training.hooks import StepInfo

    return StepInfo(party="client", epoch=0, step=0, rows=np.arange(4))


def test_client_detectors_bind_through_the_alignment_and_warm_splitout_up_without_changing_training():
    from vsplit.app.local import run_sessions
    from vsplit.app.session import Schedule, train_session
    from vsplit.party import FeatureParty, LabelParty
    from vsplit.privacy.detectors.client import ClientDetectors
    from vsplit.topology import Topology

    rng = np.random.default_rng(0)
    ids = [f"c{i:03d}" for i in range(240)]
    x = rng.normal(size=(240, 4))
    y = (x[:, 0] + 0.3 * rng.normal(size=240) > 0).astype(int)
    order = rng.permutation(240)  # the client's table in its own order, not the aligned one
    client_table = pd.DataFrame({"customer_id": np.array(ids)[order], **{f"x{j}": x[order, j] for j in range(4)}})
    server_table = pd.DataFrame({"customer_id": ids, "y": y})
    topology = Topology.vanilla(client="client", server="server")

    def fit(prepare=None, hooks=None):
        client = FeatureParty("client", client_table, seed=0)
        server = LabelParty("server", server_table, label="y", seed=0)
        schedule = Schedule(epochs=2, batch_size=32)
        out = run_sessions({"client": train_session(client, topology, schedule=schedule, hooks=hooks,
                                                    prepare=prepare),
                            "server": train_session(server, topology, schedule=schedule)}, session=b"d" * 16)
        return client, out["client"]

    plain, _ = fit()
    watch = ClientDetectors(["splitout:patience=1000", "gradient_scrutinizer:threshold=-1"], party="client",
                            labels=y[order], warm_up_epochs=1, batch_size=32)
    watched, outcome = fit(prepare=watch.prepare, hooks=watch.hooks())
    splitout, scrutinizer = watch.detectors
    assert splitout.model_ is not None and len(splitout.history) == scrutinizer.batches > 0
    # labels bound in aligned order: the client's table row of each aligned position
    assert scrutinizer.labels.tolist() == y[order][outcome.rows].tolist()
    assert scrutinizer.labels.tolist() == y[np.argsort(ids)].tolist()
    for (k, a), b in zip(plain.segment_models["bottom"].state_dict().items(),
                         watched.segment_models["bottom"].state_dict().values(), strict=True):
        assert torch.equal(a, b), k
