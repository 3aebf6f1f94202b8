"""The attacks find what leaks when nothing defends, and the hijack monitor tells honest from malicious gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vsplit.estimator import SplitClassifier, TrainingHooks
from vsplit.privacy.attacks import HijackMonitor, model_completion, reconstruct_features
from vsplit.privacy.audit import AuditData, run_once
from vsplit.protocol.training.hooks import StepInfo

TRAINING = {"epochs": 20, "batch_size": 256, "lr": 3e-3}


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def undefended(data) -> dict:
    return run_once(data, "none", seed=0, known_labels=(40, 200), aux_rows=200, estimator=TRAINING)


def test_feature_party_reads_labels_from_gradient_norms_and_directions(undefended):
    assert undefended["norm_leak_auc"] >= 0.80
    assert undefended["direction_leak_auc"] >= 0.95
    assert undefended["direction_leak_auc_p95"] >= undefended["direction_leak_auc"]
    assert undefended["test_auc"] > 0.85  # the model is a real one


def test_label_party_reconstructs_partner_columns_from_embeddings(undefended):
    assert undefended["reconstruction_r2"] >= 0.4
    assert undefended["reconstruction_r2_scoring"] >= 0.4  # the embeddings sent for scoring leak as much


def test_model_completion_reports_both_heads_per_label_budget(undefended):
    for n in (40, 200):
        assert 0.5 < undefended[f"model_completion_auc_{n}"] <= 1.0
        assert 0.5 < undefended[f"raw_features_auc_{n}"] <= 1.0
    assert undefended["model_completion_auc_200"] > 0.8


def test_reconstruction_falls_to_prior_baseline_on_pure_noise():
    rng = np.random.default_rng(1)
    report = reconstruct_features(
        rng.normal(size=(800, 8)), rng.integers(1, 4, size=(800, 1)), rng.normal(size=(800, 2)),
        numeric_names=["a", "b"], categorical_names=["c"], n_aux=200,
    )
    assert report.max_r2 < 0.05  # the careful attacker falls back to the mean instead of over-fitting noise
    assert report.categorical["c"] <= report.categorical_baseline["c"] + 0.05


def test_model_completion_needs_both_classes():
    inputs = (torch.zeros(10, 0, dtype=torch.long), torch.zeros(10, 1))
    with pytest.raises(Exception, match="both classes"):
        model_completion(lambda c, n: n, inputs, np.zeros(10), inputs, np.zeros(10), n_known=4)


# -- the hijacked-training monitor ---------------------------------------------------------------------------------


class LastEmbeddings:
    """Test-only: the malicious label party's copy of the embeddings it just received."""

    values: torch.Tensor | None = None

    def __call__(self, values: torch.Tensor, info: StepInfo) -> torch.Tensor:
        if info.training:
            self.values = values.detach().clone()
        return values


class Hijack:
    """Test-only malicious label party: from ``start_epoch`` on, send the gradient of a feature-space hijacking
    objective (pull each embedding towards an attacker-chosen target) instead of the task's."""

    def __init__(self, received: LastEmbeddings, *, start_epoch: int) -> None:
        self.received, self.start_epoch = received, start_epoch
        self.targets = torch.randn(10_000, 16, generator=torch.Generator().manual_seed(7))

    def __call__(self, values: torch.Tensor, info: StepInfo) -> torch.Tensor:
        if info.epoch < self.start_epoch:
            return values
        assert self.received.values is not None
        grad = 2 * (self.received.values - self.targets[info.rows]) / len(values)
        return grad * (values.norm() / grad.norm())  # as large as the honest gradient: only the directions differ


class SignFlip:
    """Test-only malicious label party: large sign-flipped gradients from ``start_epoch`` on."""

    def __init__(self, *, start_epoch: int) -> None:
        self.start_epoch = start_epoch

    def __call__(self, values: torch.Tensor, info: StepInfo) -> torch.Tensor:
        return values if info.epoch < self.start_epoch else -50 * values


def monitored_fit(data: AuditData, *, gradient_hooks=(), embedding_hooks=(), **monitor_options) -> HijackMonitor:
    monitor = HijackMonitor(**monitor_options)
    hooks = TrainingHooks(
        gradient_hooks=list(gradient_hooks),
        embedding_hooks={"partner": list(embedding_hooks)},
        observers={"partner": [monitor]},
    )
    SplitClassifier(
        label_party="bank", label="y", epochs=6, batch_size=256, lr=3e-3, patience=None, random_state=0, hooks=hooks,
        candidates="network",
    ).fit(data.train)
    return monitor


def test_monitor_stays_quiet_on_honest_training(data):
    monitor = monitored_fit(data, min_structure=2.0)
    assert not monitor.alarmed, monitor.alarms
    assert len(monitor.history) == 6 * 11


def test_monitor_flags_a_label_party_that_switches_to_a_hijacking_objective(data):
    received = LastEmbeddings()
    monitor = monitored_fit(data, gradient_hooks=[Hijack(received, start_epoch=3)], embedding_hooks=[received])
    assert monitor.alarmed
    first = monitor.alarms[0]
    assert first.epoch == 3 and first.reason == "direction spread"


def test_monitor_flags_large_sign_flips(data):
    monitor = monitored_fit(data, gradient_hooks=[SignFlip(start_epoch=3)])
    assert monitor.alarmed and monitor.alarms[0].reason == "gradient norm"


def test_monitor_with_structure_check_flags_hijacking_from_the_first_step(data):
    received = LastEmbeddings()
    monitor = monitored_fit(
        data, gradient_hooks=[Hijack(received, start_epoch=0)], embedding_hooks=[received], min_structure=2.0
    )
    assert monitor.alarmed and monitor.alarms[0].reason == "no label structure"
